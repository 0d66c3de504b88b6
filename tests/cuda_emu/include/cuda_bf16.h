/* fake cuda_bf16.h: see ../emu.h */
#include "../emu.h"
