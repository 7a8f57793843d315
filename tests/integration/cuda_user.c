/* A CUDA driver-API program written the way a user writes one: its own prototypes, linked
 * against libcuda.so.1 by name. It prints what CUDA enumerates, one device a line:
 *   <ordinal> <uuid v2> <uuid v1> <pci bus id> <total bytes> <cc> <sms> <name>
 * or "init <code> <name>" when cuInit fails. Integration tests run it on simulated machines. */
#include <stddef.h>
#include <stdio.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct {
  char bytes[16];
} CUuuid;

CUresult cuInit(unsigned int flags);
CUresult cuDeviceGetCount(int* count);
CUresult cuDeviceGet(CUdevice* device, int ordinal);
CUresult cuDeviceGetName(char* name, int len, CUdevice device);
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device);
CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice device);
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device);
CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device);
CUresult cuDeviceGetPCIBusId(char* bus, int len, CUdevice device);
CUresult cuGetErrorName(CUresult result, const char** name);

static void format_uuid(const CUuuid* u, const char* head, char out[41]) {
  const unsigned char* b = (const unsigned char*)u->bytes;
  sprintf(out, "%s%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", head, b[0],
          b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
          b[15]);
}

static int check(CUresult rc, const char* what) {
  if (rc == 0) return 0;
  const char* name = NULL;
  cuGetErrorName(rc, &name);
  printf("error %s %d %s\n", what, rc, name ? name : "?");
  return 1;
}

int main(void) {
  CUresult rc = cuInit(0);
  if (rc != 0) {
    const char* name = NULL;
    cuGetErrorName(rc, &name);
    printf("init %d %s\n", rc, name ? name : "?");
    return 0;
  }
  int count = 0;
  if (check(cuDeviceGetCount(&count), "count")) return 1;
  printf("count %d\n", count);
  for (int i = 0; i < count; ++i) {
    CUdevice dev;
    CUuuid v1, v2;
    char name[256], bus[32], s1[41], s2[41];
    size_t total = 0;
    int major = 0, minor = 0, sms = 0;
    if (check(cuDeviceGet(&dev, i), "get") || check(cuDeviceGetUuid_v2(&v2, dev), "uuid_v2") ||
        check(cuDeviceGetUuid(&v1, dev), "uuid") ||
        check(cuDeviceGetName(name, sizeof name, dev), "name") ||
        check(cuDeviceGetPCIBusId(bus, sizeof bus, dev), "bus") ||
        check(cuDeviceTotalMem_v2(&total, dev), "mem") ||
        check(cuDeviceGetAttribute(&major, 75, dev), "major") ||
        check(cuDeviceGetAttribute(&minor, 76, dev), "minor") ||
        check(cuDeviceGetAttribute(&sms, 16, dev), "sms")) {
      return 1;
    }
    /* v2 gives a MIG device's own UUID, v1 its parent GPU's; the prefix is ours to add. */
    format_uuid(&v2, "", s2);
    format_uuid(&v1, "GPU-", s1);
    printf("%d %s %s %s %zu %d.%d %d %s\n", i, s2, s1, bus, total, major, minor, sms, name);
  }
  return 0;
}
