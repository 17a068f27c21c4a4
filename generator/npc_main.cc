// `npc`: the generator's command-line tool (see generator/cli.h).
#include "generator/cli.h"

int main(int argc, char** argv) { return npc::tool::NpcMain(argc, argv); }
