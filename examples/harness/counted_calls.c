// A program whose call counts are known from its source, for harness tests
// (harness_test.cc asserts them): main calls checksum once, checksum calls row 10 times,
// each row calls cell 4 times (40 in all). Exits with 3 when the sum is right.
// Built -O0 -static: no inlining or cloning renames a function, and no dynamic loader
// runs before main (an emulation backend pays for every instruction it steps).
__attribute__((noinline)) int cell(int r, int c) { return r * 7 + c; }

__attribute__((noinline)) int row(int r) {
  int sum = 0;
  for (int c = 0; c < 4; c++) sum += cell(r, c);
  return sum;
}

__attribute__((noinline)) int checksum(void) {
  int sum = 0;
  for (int r = 0; r < 10; r++) sum += row(r);
  return sum;
}

int main(void) { return checksum() == 1320 ? 3 : 1; }
