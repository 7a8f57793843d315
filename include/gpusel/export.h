/* gpusel: what libgpusel.so.1 exports. The library is built with hidden visibility
 * (-fvisibility=hidden), and exports symbol by symbol: GPUSEL_API marks each function of the C ABI
 * (gpusel.h), GPUSEL_CXX_API each function and class of the C++ API (the headers of
 * include/gpusel). Anything not marked is hidden, and the library's own helpers live in
 * gpusel::detail, declared in no installed header. The C++ API sits in the inline namespace
 * gpusel::v1 (GPUSEL_BEGIN_NAMESPACE): callers write gpusel::foo, and the v1 in the mangled names,
 * the same number as the library's SONAME, lets a later incompatible version sit beside this one in
 * a process (docs/versioning.md). C-compatible. */
#ifndef GPUSEL_EXPORT_H
#define GPUSEL_EXPORT_H

#if defined(_WIN32)
/* Windows: gpusel.dll exports the C functions (GPUSEL_API); the C++ API is used through the static
 * library there (define GPUSEL_STATIC, as CMake's gpusel::gpusel_static target does), so
 * GPUSEL_CXX_API marks nothing. */
#if defined(GPUSEL_STATIC)
#define GPUSEL_API
#elif defined(GPUSEL_BUILDING_LIBRARY)
#define GPUSEL_API __declspec(dllexport)
#else
#define GPUSEL_API __declspec(dllimport)
#endif
#define GPUSEL_CXX_API
#elif defined(__GNUC__) || defined(__clang__)
#define GPUSEL_API __attribute__((visibility("default")))
#define GPUSEL_CXX_API __attribute__((visibility("default")))
#else
#define GPUSEL_API
#define GPUSEL_CXX_API
#endif

#ifdef __cplusplus
/* Opens and closes the versioned namespace of the C++ API. Its number is the SONAME's
 * (GPUSEL_SOVERSION in CMakeLists.txt, which checks that the two agree). */
#define GPUSEL_BEGIN_NAMESPACE \
  namespace gpusel {           \
  inline namespace v1 {
#define GPUSEL_END_NAMESPACE \
  } /* namespace v1 */       \
  } /* namespace gpusel */
#endif

#endif /* GPUSEL_EXPORT_H */
