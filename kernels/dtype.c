/* dtype.c — the width of each weight dtype (backend.h kb_dtype_size).
 * Owns: that one switch. Must not: call anything.
 * A file of its own because both backends and every loader ask it: in
 * cpu_mem.c it made the CUDA backend call into the CPU backend's memory
 * code, which reads the device switch (device.c), which starts the CUDA
 * backend — device.c -> cuda -> cpu_mem.c -> device.c, one circle
 * (tests/cycles.sh). A leaf that calls nothing closes no circle. */
#include "backend.h"

size_t kb_dtype_size(kb_dtype dt) {
    switch (dt) {
    case KB_F32: return 4;
    case KB_BF16: return 2;
    case KB_F16: return 2;
    }
    return 0;
}
