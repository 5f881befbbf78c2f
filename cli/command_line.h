#pragma once
// What every subcommand does with its arguments before its own work:
// -h/--help, parsing, the help text, and the --run/--step checks of the
// commands that read a trained run.
#include <boost/program_options.hpp>
#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "cli/commands.h"

namespace attnlab::cli {

namespace po = boost::program_options;

// An options group (titled `caption`, untitled when empty) holding -h/--help;
// a command adds its own options to it.
po::options_description options_with_help(const std::string& caption = "");

// What a stray word on the command line probably meant ("--config L"), or ""
// when nothing obvious; see parse_command_line.
using PositionalHint = std::function<std::string(const std::string& word)>;

// Parses `args` against `options` (which hold -h/--help) and assigns the
// bound variables. With --help it assigns nothing, prints `usage`, the options
// and `footer` to stdout and returns false: the command is done (exit 0).
// Boost's po::error for an unknown option or a malformed value; ValueError
// naming a word that is neither an option nor one of `positional` (Boost
// would drop it silently), with `hint`'s suggestion, or by default "--task W"
// when the command has --task and W is a task's name.
bool parse_command_line(const Args& args, const po::options_description& options, po::variables_map& vm,
                        const std::string& usage, const std::string& footer = "",
                        const po::positional_options_description* positional = nullptr,
                        const PositionalHint& hint = nullptr);

// Help text that fits `width` columns, as every --help does: a paragraph
// (lines that start with a letter, up to a blank or indented line) with a line
// over `width` is filled again; an indented line over `width` (an example
// command) is broken at spaces, each piece but the last ending in " \" (a
// shell continuation), the rest indented 4 more. Other lines stay as written.
std::string fit_columns(const std::string& text, size_t width = 80);

// The long names of the options `vm` holds that were given, not defaulted:
// right after parse_command_line, the ones the user wrote on the command line.
std::set<std::string> given_options(const po::variables_map& vm);

// Stores the options of an INI file (--config FILE) into `vm`, checked first:
// IoError unless FILE is a readable regular file (not a directory, a device
// or a pipe) of text (no NUL or other control bytes, at most 1 MiB);
// ValueError naming the file for a line Boost cannot read, an unknown option
// or a malformed value.
void store_config_file(const std::string& path, const po::options_description& options, po::variables_map& vm);

// The checks of --run DIR (required) and --step N (>= 1 when given) that
// eval, predict and attention share. ValueError naming the option.
void check_run_and_step(const po::variables_map& vm, const std::string& run_path, int64_t step);

// What the one-input commands (predict, attention) read besides their own
// options: --run, the input (--input or the positional argument) and --step.
struct RunInputArgs {
  std::string run_path, input_text;
  int64_t step = 0;
};
// Adds --run, --input and --step to `opts` and makes --input positional.
void add_run_input_options(po::options_description& opts, po::positional_options_description& positional,
                           RunInputArgs& args);
// check_run_and_step, then ValueError when no input was given.
void check_run_input(const po::variables_map& vm, const RunInputArgs& args, const std::string& command);

}  // namespace attnlab::cli
