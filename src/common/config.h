// config.h — one configuration schema per command, read from a file, from PENSTOCK_*
// environment variables and from flags. Precedence: flags > environment > file > default.
//
// The schema is the set of options a command declares on its CLI11 app with AddSetting():
// each setting `--data-dir` is also read from PENSTOCK_DATA_DIR and from the key `data-dir`
// (or `data_dir`) in the file given by `--config FILE` (TOML/INI: `key = value`).
// Unknown keys in a config file are errors, so a typo never passes silently.
// Use: declare settings and EnableConfigFile(app, &path); app.parse(...); then
// ApplyConfigFile(app, path). Not thread-safe; used while parsing at start-up.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace penstock {

// "data-dir" -> "PENSTOCK_DATA_DIR".
std::string EnvNameFor(const std::string& setting);

// Declares setting `name` bound to `*value`, with its environment variable.
template <typename T>
CLI::Option* AddSetting(CLI::App& app, const std::string& name, T* value,
                        const std::string& help) {
  return app.add_option("--" + name, *value, help)
      ->envname(EnvNameFor(name))
      ->capture_default_str();
}

// Adds `--config FILE` (also PENSTOCK_CONFIG) to `app`, stored in `*path`.
void EnableConfigFile(CLI::App& app, std::string* path);

// After app.parse(): sets every setting of `app` that neither a flag nor the environment
// gave from the file at `path` (no-op when `path` is empty). Values are validated like flags.
// Throws CLI::ParseError / CLI::ValidationError naming the file and key on a missing file,
// an unknown key or a bad value.
void ApplyConfigFile(CLI::App& app, const std::string& path);

// After ApplyConfigFile(): throws CLI::RequiredError unless setting `name` was given by a
// flag, the environment or the config file. (CLI11's own required() cannot see the file.)
void RequireSetting(CLI::App& app, const std::string& name);

// Parses a size such as "4096", "64K", "1M", "2GiB" into bytes. Throws CLI::ValidationError
// naming `what` on bad input.
uint64_t ParseSize(const std::string& text, const std::string& what);

}  // namespace penstock
