/* fake cuda_fp16.h: see ../emu.h */
#include "../emu.h"
