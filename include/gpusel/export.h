/* gpusel: what libgpusel.so.0 exports. The library is built with hidden visibility
 * (-fvisibility=hidden); GPUSEL_API marks the public C functions, and the C++ API lives in the
 * inline namespace gpusel::v0 (GPUSEL_BEGIN_NAMESPACE), which is exported as a whole. Code that is
 * not API lives in gpusel::detail (hidden, not exported). Callers write gpusel::foo; the v0 in the
 * mangled names lets a future incompatible version (v1) sit beside this one. C-compatible. */
#ifndef GPUSEL_EXPORT_H
#define GPUSEL_EXPORT_H

#if defined(_WIN32)
/* Windows: gpusel.dll exports the C functions (GPUSEL_API); the C++ API is used through the static
 * library there (define GPUSEL_STATIC, as CMake's gpusel::gpusel_static target does). */
#if defined(GPUSEL_STATIC)
#define GPUSEL_API
#elif defined(GPUSEL_BUILDING_LIBRARY)
#define GPUSEL_API __declspec(dllexport)
#else
#define GPUSEL_API __declspec(dllimport)
#endif
#define GPUSEL_NAMESPACE_API
#elif defined(__GNUC__) || defined(__clang__)
#define GPUSEL_API __attribute__((visibility("default")))
#define GPUSEL_NAMESPACE_API GPUSEL_API
#else
#define GPUSEL_API
#define GPUSEL_NAMESPACE_API
#endif

#ifdef __cplusplus
/* Opens and closes the versioned namespace of the C++ API. (Every block that declares or defines
 * API opens it this way: clang takes visibility from the namespace block a symbol is defined in.)
 */
#define GPUSEL_BEGIN_NAMESPACE \
  namespace gpusel {           \
  inline namespace v0 GPUSEL_NAMESPACE_API {
#define GPUSEL_END_NAMESPACE \
  } /* namespace v0 */       \
  } /* namespace gpusel */
#endif

#endif /* GPUSEL_EXPORT_H */
