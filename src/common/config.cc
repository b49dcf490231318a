#include "common/config.h"

#include <algorithm>
#include <cctype>
#include <fstream>

namespace penstock {

std::string EnvNameFor(const std::string& setting) {
  std::string env = "PENSTOCK_";
  for (char c : setting) {
    env += (c == '-' || c == '.') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return env;
}

void EnableConfigFile(CLI::App& app, std::string* path) {
  app.add_option("--config", *path, "configuration file (key = value per line)")
      ->envname("PENSTOCK_CONFIG");
}

void ApplyConfigFile(CLI::App& app, const std::string& path) {
  if (path.empty()) return;
  std::ifstream in(path);
  if (!in) {
    throw CLI::FileError("config file '" + path + "' cannot be read; check the --config path");
  }
  CLI::ConfigTOML parser;
  std::vector<CLI::ConfigItem> items = parser.from_config(in);
  for (const CLI::ConfigItem& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // section markers
    std::string name = item.name;
    for (char& c : name) {
      if (c == '_') c = '-';
    }
    CLI::Option* opt = app.get_option_no_throw("--" + name);
    if (opt == nullptr || name == "config") {
      throw CLI::ConversionError("config file '" + path + "': unknown setting '" + item.name +
                                 "' (see --help for the settings this command takes)");
    }
    if (opt->count() > 0) continue;  // a flag or the environment wins
    try {
      opt->add_result(item.inputs);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      throw CLI::ValidationError("config file '" + path + "', setting '" + item.name + "'",
                                 e.what());
    }
  }
}

void RequireSetting(CLI::App& app, const std::string& name) {
  CLI::Option* opt = app.get_option_no_throw("--" + name);
  if (opt == nullptr || opt->count() == 0) {
    throw CLI::RequiredError("--" + name + " is required (as a flag, " + EnvNameFor(name) +
                             " or `" + name + " = ...` in the --config file)");
  }
}

uint64_t ParseSize(const std::string& text, const std::string& what) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0) {
    throw CLI::ValidationError(what, "'" + text + "' is not a size (use e.g. 4096, 64K, 1M, 2G)");
  }
  std::string digits = text.substr(0, i);
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));  // leading zeros
  // Beyond 2^64 - 1 (20 digits), which std::stoull would throw on.
  if (digits.size() > 20 || (digits.size() == 20 && digits > "18446744073709551615")) {
    throw CLI::ValidationError(what, "'" + text + "' is too large a size");
  }
  const uint64_t n = std::stoull(digits);
  std::string unit = text.substr(i);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();
  if (unit.size() > 1 && unit.back() == 'I') unit.pop_back();
  uint64_t mult = 1;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K") mult = 1ull << 10;
  else if (unit == "M") mult = 1ull << 20;
  else if (unit == "G") mult = 1ull << 30;
  else if (unit == "T") mult = 1ull << 40;
  else throw CLI::ValidationError(what, "'" + text + "' has an unknown unit (use K, M, G or T)");
  if (n > UINT64_MAX / mult) throw CLI::ValidationError(what, "'" + text + "' is too large a size");
  return n * mult;
}

}  // namespace penstock
