// log.h — process-wide logging through spdlog.
// Daemons log to stderr (penstock up redirects it to a file per daemon); the CLI logs only
// warnings and errors so its stdout stays clean for people and scripts. Thread-safe.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

#include "penstock/status.h"

namespace penstock {

// Sets up the default logger: `name` appears in every line, `level` is one of
// trace|debug|info|warn|error|off. Errors: kInvalidArgument for an unknown level.
Status InitLogging(std::string_view name, std::string_view level);

}  // namespace penstock

#define PS_LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define PS_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define PS_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define PS_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
