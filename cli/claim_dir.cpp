// attnlab claim-dir: the ownership rule of a tool's directory
// (training/run_dir/tool_dir.h), for scripts/tools/sweep.py and scripts/tools/tune.py,
// which ask here rather than keep a second copy of the rule.
#include "cli/command_line.h"
#include "framework/error.h"
#include "training/run_dir/tool_dir.h"

namespace attnlab::cli {

int run_claim_dir(const Args& args) {
  std::string kind, dir;
  po::options_description opts = options_with_help("Options");
  opts.add_options()("kind", po::value(&kind), "sweep (scripts/tools/sweep.py) or study (scripts/tools/tune.py); required")(
      "dir", po::value(&dir), "the directory (also the positional argument); required");
  po::positional_options_description positional;
  positional.add("dir", 1);
  po::variables_map vm;
  if (!parse_command_line(args, opts, vm,
                          "usage: attnlab claim-dir --kind sweep|study DIR\n\n"
                          "Takes DIR for a tool: a missing or empty directory is created and marked\n"
                          "(.attnlab-sweep, .attnlab-study); one carrying the same marker is accepted\n"
                          "(an interrupted sweep or study continues); anything else, or a symbolic link\n"
                          "as DIR or inside it, is refused with one line and exit 2.\n\n",
                          "", &positional))
    return kExitOk;
  if (!vm.count("kind")) throw ValueError("--kind is required (sweep or study)");
  if (!vm.count("dir")) throw ValueError("give the directory to claim");
  claim_tool_directory(dir, parse_choice<ToolKind>("--kind", kind, Naming::flag));
  return kExitOk;
}

}  // namespace attnlab::cli
