/* fake cuda_runtime.h: see ../emu.h */
#include "../emu.h"
