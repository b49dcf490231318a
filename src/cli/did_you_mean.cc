#include "cli/did_you_mean.h"

#include <algorithm>
#include <cctype>

namespace penstock::cli {

size_t EditDistance(std::string_view a, std::string_view b) {
  // d[i][j]: distance between a's first i and b's first j characters.
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string Nearest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = 0;
  for (const auto& c : candidates) {
    const size_t d = EditDistance(word, c);
    if (best.empty() || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  // Letters of the word itself, without a flag's dashes.
  const size_t letters = word.size() - std::min(word.find_first_not_of('-'), word.size());
  if (best.empty() || best_distance > 2 || 2 * best_distance >= letters) return "";
  return best;
}

namespace {

// The subcommands of `app` a user can type (not CLI11's nameless option groups).
std::vector<const CLI::App*> NamedSubcommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* s) { return !s->get_name().empty(); });
}

// "penstock ls" for the app `ls`.
std::string CommandPath(const CLI::App& app) {
  std::string path = app.get_name();
  for (const CLI::App* p = app.get_parent(); p != nullptr; p = p->get_parent()) {
    path = (p->get_parent() == nullptr ? std::string("penstock") : p->get_name()) + " " + path;
  }
  return app.get_parent() == nullptr ? "penstock" : path;
}

// "; did you mean 'X'?" when one of `candidates` is near `word`, then where to look.
std::string Suggestion(std::string_view word, const std::vector<std::string>& candidates, const CLI::App& app) {
  const std::string nearest = Nearest(word, candidates);
  return (nearest.empty() ? "" : "; did you mean '" + nearest + "'?") + " (see `" + CommandPath(app) + " --help`)";
}

std::string UnknownCommand(const CLI::App& app, const std::string& word) {
  // A subcommand's words after the command's own: "container crate" for `penstock container crate`.
  const std::string path = CommandPath(app);
  const std::string prefix = app.get_parent() == nullptr ? "" : path.substr(path.find(' ') + 1) + " ";
  std::vector<std::string> names;
  for (const CLI::App* s : NamedSubcommands(app)) names.push_back(prefix + s->get_name());
  return "unknown command '" + prefix + word + "'" + Suggestion(prefix + word, names, app);
}

std::string UnknownFlag(const CLI::App& app, const std::string& flag) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options()) {
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
  }
  return "unknown flag '" + flag + "'" + Suggestion(flag, names, app);
}

// A word that is an option's name ("--x", "--x=v", "-x") and not a value such as "-" or "-5".
bool LooksLikeFlag(const std::string& word) {
  return word.size() > 1 && word[0] == '-' && !std::isdigit(static_cast<unsigned char>(word[1])) && word[1] != '.';
}

bool TakesPositionals(const CLI::App& app) {
  const auto opts = app.get_options();
  return std::any_of(opts.begin(), opts.end(), [](const CLI::Option* o) { return o->get_positional(); });
}

}  // namespace

std::string DescribeUnknownWord(const CLI::App& root, int argc, const char* const* argv) {
  const CLI::App* app = &root;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;  // only positional arguments follow
    if (LooksLikeFlag(word)) {
      const bool is_long = word[1] == '-';
      const std::string name = is_long ? word.substr(0, word.find('=')) : word.substr(0, 2);
      const CLI::Option* opt = app->get_option_no_throw(name);
      if (opt == nullptr) return UnknownFlag(*app, name);
      // The value of an option given as "--name value" or "-n value" is not a word to check.
      const bool value_attached = is_long ? word.find('=') != std::string::npos : word.size() > 2;
      if (opt->get_type_size() != 0 && !value_attached) ++i;
      continue;
    }
    const auto subs = NamedSubcommands(*app);
    auto sub = std::find_if(subs.begin(), subs.end(), [&](const CLI::App* s) { return s->check_name(word); });
    if (sub != subs.end()) {
      app = *sub;
    } else if (!subs.empty() && (app->get_require_subcommand_min() > 0 || !TakesPositionals(*app))) {
      return UnknownCommand(*app, word);
    }
  }
  return "";
}

}  // namespace penstock::cli
