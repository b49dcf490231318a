#include "client/rpc_caller.h"

#include "common/await.h"
#include "transport/rpc_client.h"

namespace penstock {

RpcReply RpcCaller::CallSync(const std::string& address, uint16_t opcode,
                             std::span<const std::byte> header, std::span<const std::byte> payload) {
  return Await<RpcReply>([&](auto done) { Call(address, opcode, header, payload, std::move(done)); });
}

void UcxRpcCaller::Call(const std::string& address, uint16_t opcode, std::span<const std::byte> header,
                        std::span<const std::byte> payload, std::function<void(RpcReply)> done,
                        std::shared_ptr<ReplyDestination> into, std::shared_ptr<CallAbandon> abandon) {
  rpc_->Call(address, opcode, header, payload, std::move(done), std::move(into), std::move(abandon));
}

}  // namespace penstock
