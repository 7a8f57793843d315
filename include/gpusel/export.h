/* gpusel: what libgpusel.so.2 exports, and the C++ API's namespace.
 * The shared library (libgpusel.so.2, gpusel.dll) is the binary contract, and it is C only: it
 * exports the functions of gpusel.h, each marked GPUSEL_API, and nothing else. The library is built
 * with hidden visibility and a version script that lets out gpusel_* alone.
 * The C++ API (the other headers of include/gpusel) is for programs that link the static library,
 * libgpusel.a (CMake: gpusel::gpusel_static), built with the same compiler family; its types hold
 * std:: types, so it is never part of the shared library's ABI (docs/versioning.md). It sits in the
 * inline namespace gpusel::v2 (GPUSEL_BEGIN_NAMESPACE), the number of the SONAME: callers write
 * gpusel::foo. C-compatible. */
#ifndef GPUSEL_EXPORT_H
#define GPUSEL_EXPORT_H

#if defined(_WIN32)
/* Windows: gpusel.dll exports the C functions (GPUSEL_API); the static library's users get
 * GPUSEL_STATIC from CMake's gpusel::gpusel_static. */
#if defined(GPUSEL_STATIC)
#define GPUSEL_API
#elif defined(GPUSEL_BUILDING_LIBRARY)
#define GPUSEL_API __declspec(dllexport)
#else
#define GPUSEL_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define GPUSEL_API __attribute__((visibility("default")))
#else
#define GPUSEL_API
#endif

#ifdef __cplusplus
/* Opens and closes the versioned namespace of the C++ API. Its number is the SONAME's
 * (GPUSEL_SOVERSION in CMakeLists.txt, which checks that the two agree). */
#define GPUSEL_BEGIN_NAMESPACE \
  namespace gpusel {           \
  inline namespace v2 {
#define GPUSEL_END_NAMESPACE \
  } /* namespace v2 */       \
  } /* namespace gpusel */
#endif

#endif /* GPUSEL_EXPORT_H */
