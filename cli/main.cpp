// attnlab: entry point (subcommands are added in cli/).
#include <iostream>
int main() {
  std::cout << "attnlab\n";
  return 0;
}
