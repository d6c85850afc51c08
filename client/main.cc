// `kerneleval`: the command-line client. Everything lives in the client library; see cli.h.
#include "client/cli.h"

int main(int argc, char** argv) { return kerneleval::client::cli::Main(argc, argv); }
