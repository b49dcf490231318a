// await.h — the blocking form of a callback-style asynchronous call.
//
//   Status s = Await<Status>([&](auto done) { io.Write(..., std::move(done)); });
//
// `start` receives a completion callback (std::function<void(T)>) and must arrange for it to run
// exactly once, on any thread but the caller's; Await blocks until it has and returns its value.
// Not for use on a thread that runs those completions (it would wait for itself).
#pragma once

#include <functional>
#include <future>
#include <utility>

namespace penstock {

template <typename T, typename Start>
T Await(Start&& start) {
  std::promise<T> p;
  auto f = p.get_future();
  std::forward<Start>(start)(std::function<void(T)>([&p](T v) { p.set_value(std::move(v)); }));
  return f.get();
}

}  // namespace penstock
