// `neuron_parallel_compile`: drop-in for AWS Neuron's tool (see generator/cli.h).
#include "generator/cli.h"

int main(int argc, char** argv) { return npc::tool::NeuronParallelCompileMain(argc, argv); }
