// goodputctl: the command-line client of goodput. `goodputctl --help` lists the commands,
// `goodputctl COMMAND --help` explains one. Human-readable tables by default, `--json` for
// scripts (protobuf JSON). Errors go to stderr; the exit code is 1 when the operation failed
// and 2 for a bad command line.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/goodputctl/cli.h"
#include "tools/goodputctl/commands.h"

namespace goodput::ctl {
namespace {

constexpr char kGlobalHelp[] = R"(
global flags:
  --addr HOST:PORT         the address of the service the command talks to
  --ingest-addr, --ofu-addr, --mfu-addr, --alerting-addr HOST:PORT
                           [$GOODPUT_INGEST_ADDR, $GOODPUT_OFU_ADDR, $GOODPUT_MFU_ADDR,
                            $GOODPUT_ALERTING_ADDR, else 127.0.0.1:7101..7104]
  --token TOKEN            bearer token when auth is on [$GOODPUT_TOKEN]
  --json                   machine-readable output (protobuf JSON)
TLS (when the services serve it): $GOODPUT_TLS_CA (the CA file; turns TLS on),
  $GOODPUT_TLS_CERT and $GOODPUT_TLS_KEY (a client certificate, for mTLS),
  $GOODPUT_TLS_SERVER_NAME (the name in the services' certificate, if not the address's host)
  --help                   help for a command: goodputctl alerts list --help
)";

std::vector<Command> AllCommands() {
  std::vector<Command> all;
  for (auto group : {JobCommands, OfuCommands, MfuCommands, AlertCommands, ReportCommands,
                     FaultCommands, ActionCommands}) {
    for (Command& c : group()) all.push_back(std::move(c));
  }
  return all;
}

std::string Usage(const Command& c) {
  std::string line = absl::StrCat("goodputctl ", absl::StrJoin(c.words, " "));
  if (!c.arguments.empty()) absl::StrAppend(&line, " ", c.arguments);
  if (!c.flags.empty()) absl::StrAppend(&line, " [flags]");
  return line;
}

void PrintOverview(const std::vector<Command>& commands) {
  std::cout << "usage: goodputctl COMMAND [arguments] [flags]\n\ncommands:\n";
  for (const Command& c : commands) {
    std::string name = absl::StrJoin(c.words, " ");
    if (!c.arguments.empty()) absl::StrAppend(&name, " ", c.arguments);
    std::cout << "  " << name << std::string(name.size() < 36 ? 36 - name.size() : 1, ' ')
              << c.summary << "\n";
  }
  std::cout << kGlobalHelp;
}

void PrintCommandHelp(const Command& c) {
  std::cout << "usage: " << Usage(c) << "\n\n" << c.summary << "\n";
  if (!c.details.empty()) std::cout << "\n" << c.details;
  std::cout << kGlobalHelp;
}

bool GlobalFlag(const std::string& name) {
  return name == "addr" || name == "token" || name == "ingest-addr" || name == "ofu-addr" ||
         name == "mfu-addr" || name == "alerting-addr" || name == "no-progress";
}

// The command whose words are the longest prefix of the positional words.
const Command* Find(const std::vector<Command>& commands, const Args& args) {
  const Command* best = nullptr;
  for (const Command& c : commands) {
    if (c.words.size() > args.positional.size()) continue;
    bool match = true;
    for (size_t i = 0; i < c.words.size(); ++i) match = match && c.words[i] == args.positional[i];
    if (match && (best == nullptr || c.words.size() > best->words.size())) best = &c;
  }
  return best;
}

int Main(int argc, char** argv) {
  Args args = ParseArgs(argc, argv);
  const std::vector<Command> commands = AllCommands();
  if (args.positional.empty() || args.Word(0) == "help") {
    if (args.Word(0) == "help" && args.positional.size() > 1) {
      Args rest = args;
      rest.positional.erase(rest.positional.begin());
      if (const Command* c = Find(commands, rest)) {
        PrintCommandHelp(*c);
        return kExitOk;
      }
    }
    PrintOverview(commands);
    return args.help || args.Word(0) == "help" ? kExitOk : kExitUsage;
  }
  const Command* command = Find(commands, args);
  if (command == nullptr) {
    // A group word alone ("alerts", "fleet"): list what it has.
    std::vector<std::string> subs;
    for (const Command& c : commands) {
      if (c.words.size() > 1 && c.words[0] == args.Word(0)) {
        subs.push_back(absl::StrJoin(c.words.begin() + 1, c.words.end(), " "));
      }
    }
    if (!subs.empty()) {
      if (args.help) {
        for (const Command& c : commands) {
          if (c.words[0] == args.Word(0))
            std::cout << "  " << Usage(c) << "\n      " << c.summary << "\n";
        }
        return kExitOk;
      }
      return UsageError(
          absl::StrCat(args.Word(0), " needs a subcommand: ", absl::StrJoin(subs, ", ")));
    }
    return UsageError(absl::StrCat("unknown command '", args.Word(0), "' (see goodputctl --help)"));
  }
  if (args.help) {
    PrintCommandHelp(*command);
    return kExitOk;
  }
  for (const auto& [name, value] : args.flags) {
    if (!GlobalFlag(name) && !command->flags.contains(name)) {
      return UsageError(absl::StrCat("unknown flag --", name, " for '",
                                     absl::StrJoin(command->words, " "), "' (see goodputctl ",
                                     absl::StrJoin(command->words, " "), " --help)"));
    }
  }
  return command->run(args);
}

}  // namespace
}  // namespace goodput::ctl

int main(int argc, char** argv) { return goodput::ctl::Main(argc, argv); }
