// Replaced as the module gets its first real source file.
namespace ptd {
int sideband_placeholder = 0;
}  // namespace ptd
