// Drives the runtime's buffer cache (lib/Runtime/BufferCache.h) as compiled
// models do: prints one line per check, "ok" or what went wrong.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void *vmoe_buffer_alloc(size_t size);
void *vmoe_buffer_aligned_alloc(size_t alignment, size_t size);
void vmoe_buffer_free(void *buffer);

static int failures = 0;

static void check(int ok, const char *what) {
  printf("%s: %s\n", what, ok ? "ok" : "FAILED");
  failures += !ok;
}

int main(void) {
  // A freed buffer is the next buffer of its size, and only of its size.
  char *a = vmoe_buffer_alloc(1 << 20);
  memset(a, 1, 1 << 20);
  check((uintptr_t)a % 64 == 0, "64-byte aligned");
  vmoe_buffer_free(a);
  char *other = vmoe_buffer_alloc((1 << 20) + 4);
  check(other != a, "another size gets another buffer");
  char *b = vmoe_buffer_alloc(1 << 20);
  check(b == a, "same size reuses the freed buffer");
  char *c = vmoe_buffer_alloc(1 << 20);
  check(c != b, "a buffer in use is not handed out twice");
  vmoe_buffer_free(b);
  vmoe_buffer_free(c);
  vmoe_buffer_free(other);
  vmoe_buffer_free(NULL);
  // Alignment requests, kept in their own bins.
  char *big = vmoe_buffer_aligned_alloc(4096, 100);
  check((uintptr_t)big % 4096 == 0, "4096-byte alignment");
  vmoe_buffer_free(big);
  char *small = vmoe_buffer_aligned_alloc(64, 100);
  check(small != big, "alignments are not mixed");
  char *again = vmoe_buffer_aligned_alloc(4096, 100);
  check(again == big, "aligned buffers are reused");
  char *odd = vmoe_buffer_aligned_alloc(24, 8);
  check((uintptr_t)odd % 64 == 0, "small alignments become 64");
  char *zero = vmoe_buffer_alloc(0);
  check(zero != NULL, "zero bytes is a buffer");
  vmoe_buffer_free(small);
  vmoe_buffer_free(again);
  vmoe_buffer_free(odd);
  vmoe_buffer_free(zero);
  printf("buffer_cache: %d failures\n", failures);
  return failures != 0;
}
