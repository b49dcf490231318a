// put_get.cc — the smallest Penstock program: connect to a cluster, create a container, store
// an object, read it back and check that the bytes are the ones stored.
//
//   put_get [MGMT_ADDRESS]
//
// MGMT_ADDRESS is mgmt's host:port, as `penstock up` prints it; without it the program takes
// $PENSTOCK_MGMT, then 127.0.0.1:7000. Exits 0 when the bytes came back unchanged.
// Build it with CMake (CMakeLists.txt beside it) or pkg-config (../README.md).
#include <penstock/client.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// The container this program creates (or reuses, when an earlier run created it).
constexpr const char* kContainer = "examples";

// Prints a failed step with the library's message (which names the thing and the fix).
int Fail(const char* step, const penstock::Status& status) {
  std::fprintf(stderr, "put_get: %s: %s\n", step, status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  penstock::ClientOptions options;
  if (argc > 1) {
    options.mgmt_address = argv[1];
  } else if (const char* env = std::getenv("PENSTOCK_MGMT")) {
    options.mgmt_address = env;
  }

  // One Client per process: it is thread-safe, holds the cluster map and the data-plane
  // connections, and must outlive everything it hands out.
  penstock::Result<std::unique_ptr<penstock::Client>> connected = penstock::Client::Connect(options);
  if (!connected.ok()) return Fail("connect", connected.status());
  penstock::Client& client = **connected;

  // A container holds objects and decides how they are protected. Without a redundancy the
  // cluster picks its default; ContainerProps{.redundancy = penstock::ParseRedundancy("rep:2")
  // .value()} would choose one.
  penstock::Result<penstock::ContainerInfo> container = client.CreateContainer(kContainer);
  if (!container.ok() && container.status().code() == penstock::StatusCode::kAlreadyExists) {
    container = client.GetContainer(kContainer);
  }
  if (!container.ok()) return Fail("create container", container.status());
  std::printf("container %s (%s)\n", container->name.c_str(),
              container->redundancy.ToString().c_str());

  // 3 MiB and a few bytes: more than one stripe (1 MiB each by default), so the object is
  // split, spread over the targets and put back together on the way out.
  std::vector<std::byte> data((3 << 20) + 5);
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::byte((i * 131 + i / 4096) & 0xff);

  // Put replaces any object of that name atomically: readers see the old bytes or the new ones.
  if (penstock::Status put = client.Put(kContainer, "hello.bin", data); !put.ok()) {
    return Fail("put", put);
  }
  penstock::Result<std::vector<std::byte>> got = client.Get(kContainer, "hello.bin");
  if (!got.ok()) return Fail("get", got.status());

  if (*got != data) {
    std::fprintf(stderr, "put_get: got %zu bytes back, but they differ from the %zu stored\n",
                 got->size(), data.size());
    return 1;
  }
  std::printf("put and got back %zu bytes of %s/hello.bin: identical\n", data.size(), kContainer);
  return 0;
}
