#include "common/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace penstock {
namespace {

struct Opts {
  std::string data_dir = "/default";
  int port = 7000;
};

std::string g_config;

void Declare(CLI::App& app, Opts& o) {
  g_config.clear();
  EnableConfigFile(app, &g_config);
  AddSetting(app, "data-dir", &o.data_dir, "data directory");
  AddSetting(app, "port", &o.port, "port")->check(CLI::Range(1, 65535));
}

TEST(ConfigTest, EnvName) { EXPECT_EQ(EnvNameFor("data-dir"), "PENSTOCK_DATA_DIR"); }

TEST(ConfigTest, PrecedenceFlagsOverEnvOverFile) {
  std::string path = ::testing::TempDir() + "/penstock_cfg.toml";
  {
    std::ofstream f(path);
    f << "data-dir = \"/from/file\"\nport = 7100\n";
  }
  {
    Opts o;
    CLI::App app;
    Declare(app, o);
    std::vector<std::string> args = {"--port", "7300", "--config", path};
    std::reverse(args.begin(), args.end());
    ::setenv("PENSTOCK_DATA_DIR", "/from/env", 1);
    app.parse(args);
    ApplyConfigFile(app, g_config);
    EXPECT_EQ(o.data_dir, "/from/env");
    EXPECT_EQ(o.port, 7300);
    ::unsetenv("PENSTOCK_DATA_DIR");
  }
  {
    Opts o;
    CLI::App app;
    Declare(app, o);
    std::vector<std::string> args = {path, "--config"};
    app.parse(args);
    ApplyConfigFile(app, g_config);
    EXPECT_EQ(o.data_dir, "/from/file");
    EXPECT_EQ(o.port, 7100);
  }
  std::remove(path.c_str());
}

TEST(ConfigTest, BadValuesAreErrors) {
  Opts o;
  CLI::App app;
  Declare(app, o);
  std::vector<std::string> args = {"99999", "--port"};
  EXPECT_THROW(app.parse(args), CLI::ValidationError);

  std::string path = ::testing::TempDir() + "/penstock_bad.toml";
  {
    std::ofstream f(path);
    f << "prot = 7100\n";  // typo
  }
  Opts o2;
  CLI::App app2;
  Declare(app2, o2);
  std::vector<std::string> args2 = {path, "--config"};
  app2.parse(args2);
  EXPECT_THROW(ApplyConfigFile(app2, g_config), CLI::ParseError);

  {
    std::ofstream f(path);
    f << "port = 123456\n";  // out of range
  }
  Opts o3;
  CLI::App app3;
  Declare(app3, o3);
  std::vector<std::string> args3 = {path, "--config"};
  app3.parse(args3);
  EXPECT_THROW(ApplyConfigFile(app3, g_config), CLI::ParseError);
  EXPECT_THROW(ApplyConfigFile(app3, "/nonexistent/penstock.toml"), CLI::ParseError);
  std::remove(path.c_str());
}

TEST(ConfigTest, ParseSize) {
  EXPECT_EQ(ParseSize("4096", "x"), 4096u);
  EXPECT_EQ(ParseSize("64K", "x"), 65536u);
  EXPECT_EQ(ParseSize("1M", "x"), 1u << 20);
  EXPECT_EQ(ParseSize("2GiB", "x"), 2ull << 30);
  EXPECT_THROW(ParseSize("abc", "x"), CLI::ValidationError);
  EXPECT_THROW(ParseSize("5Q", "x"), CLI::ValidationError);
  // Too large for 64 bits: a clear error, not std::out_of_range from the conversion.
  EXPECT_EQ(ParseSize("18446744073709551615", "x"), UINT64_MAX);
  EXPECT_EQ(ParseSize("000000000000000000004K", "x"), 4096u);
  EXPECT_THROW(ParseSize("18446744073709551616", "x"), CLI::ValidationError);
  EXPECT_THROW(ParseSize("99999999999999999999999", "x"), CLI::ValidationError);
  EXPECT_THROW(ParseSize("17179869184G", "x"), CLI::ValidationError);
  EXPECT_EQ(ParseSize("16777215T", "x"), 16777215ull << 40);
}

}  // namespace
}  // namespace penstock
