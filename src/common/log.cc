#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace penstock {

Status InitLogging(std::string_view name, std::string_view level) {
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") {
    return InvalidArgument("log level '" + std::string(level) +
                           "' is not one of trace|debug|info|warn|error|off");
  }
  spdlog::drop(std::string(name));  // may be called again (e.g. to change the level)
  auto logger = spdlog::stderr_color_mt(std::string(name));
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
  return OkStatus();
}

}  // namespace penstock
