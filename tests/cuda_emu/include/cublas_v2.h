/* fake cublas_v2.h: the types cuda_matmul.cu names, and dlopen/dlsym
 * redirected to the emulator, which hands out a reference GEMM as
 * "cublasGemmEx" (see ../emu.h). */
#include "../emu.h"
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_SUPPORTED = 15 } cublasStatus_t;
typedef struct cublasContext *cublasHandle_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
#define CUBLAS_VER_MAJOR 13
#define dlopen emu_dlopen
#define dlsym emu_dlsym
#define dlerror emu_dlerror
