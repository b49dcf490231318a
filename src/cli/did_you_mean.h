// did_you_mean.h — what a command line that failed to parse got wrong, when it is a word the
// `penstock` app does not know: the unknown subcommand or flag, named, with the nearest known
// one ("unknown command 'stauts'; did you mean 'status'?"). main() asks it after CLI11 refuses
// a command line, whose own message would name a consequence ("A subcommand is required",
// "--container is required") instead of the typo. Pure functions over the parsed-app schema;
// only used from main's thread.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace penstock::cli {

// Optimal string alignment distance (Levenshtein with adjacent transpositions, each edit 1):
// "stauts" is 1 from "status".
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate nearest `word`, or "" when none is near enough to be what was meant (at most
// 2 edits, and fewer than half of `word`'s letters).
std::string Nearest(std::string_view word, const std::vector<std::string>& candidates);

// Walks argv (argv[0] is the program) through `root`'s subcommands and their flags and
// describes the first word that is neither: "unknown command 'stauts'; did you mean
// 'status'? (see `penstock --help`)", "unknown flag '--contianer'; did you mean
// '--container'? (see `penstock ls --help`)".
// Returns "" when every subcommand and flag is known (the error is about something else).
std::string DescribeUnknownWord(const CLI::App& root, int argc, const char* const* argv);

}  // namespace penstock::cli
