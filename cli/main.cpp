// attnlab: train and study small transformers on toy sequence tasks.
#include "cli/commands.h"

int main(int argc, char** argv) { return attnlab::cli::run_command_line(argc, argv); }
