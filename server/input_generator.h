// Moved to common/input_generator.h, shared by the server and the client.
#pragma once

#include "common/input_generator.h"
