#include "client/rpc_caller.h"

#include <future>

#include "transport/rpc_client.h"

namespace penstock {

RpcReply RpcCaller::CallSync(const std::string& address, uint16_t opcode,
                             std::span<const std::byte> header, std::span<const std::byte> payload) {
  std::promise<RpcReply> p;
  auto f = p.get_future();
  Call(address, opcode, header, payload, [&p](RpcReply r) { p.set_value(std::move(r)); });
  return f.get();
}

void UcxRpcCaller::Call(const std::string& address, uint16_t opcode, std::span<const std::byte> header,
                        std::span<const std::byte> payload, std::function<void(RpcReply)> done) {
  rpc_->Call(address, opcode, header, payload, std::move(done));
}

}  // namespace penstock
