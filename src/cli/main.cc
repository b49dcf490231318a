// penstock — one binary for every role: daemons (mgmt, target), the local cluster launcher
// (up, down, status) and the client tools (container, put, get, ls, stat, rm).
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "cli/did_you_mean.h"
#include "common/log.h"

int main(int argc, char** argv) {
  // Until a command picks its own level: warnings and errors only, on stderr, so stdout stays
  // clean for people and scripts.
  penstock::InitLogging("penstock", "warn").IgnoreError();
  CLI::App root{"penstock: distributed storage that feeds GPUs"};
  root.require_subcommand(1);
  root.set_version_flag("--version", "penstock 0.1.0");
  std::vector<penstock::cli::Command> commands;
  penstock::cli::AddDaemonCommands(root, commands);
  penstock::cli::AddLocalClusterCommands(root, commands);
  penstock::cli::AddStatusCommands(root, commands);
  penstock::cli::AddObjectCommands(root, commands);
  penstock::cli::AddTenantCommands(root, commands);
  penstock::cli::AddBenchCommand(root, commands);
  penstock::cli::AddMountCommands(root, commands);
  penstock::cli::AddFsCommands(root, commands);
  try {
    root.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {
      // A mistyped command or flag is named (with the nearest known one) rather than what
      // CLI11 noticed first, e.g. "A subcommand is required" for `penstock stauts`.
      const std::string unknown = penstock::cli::DescribeUnknownWord(root, argc, argv);
      if (!unknown.empty()) {
        std::cerr << "penstock: error: " << unknown << "\n";
        return 2;
      }
      std::cerr << "penstock: error: " << e.what() << " (see --help)\n";
      return 2;
    }
    return root.exit(e);
  }
  for (auto& c : commands) {
    if (!c.app->parsed()) continue;
    try {
      return c.run();
    } catch (const std::exception& e) {  // a bug: still one line and exit code 1, not an abort
      std::cerr << "penstock: error: internal error in '" << c.app->get_name() << "': " << e.what()
                << " (please report it)\n";
      return 1;
    }
  }
  std::cerr << "penstock: error: a subcommand is needed (see --help)\n";
  return 2;
}
