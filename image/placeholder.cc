// Replaced as the module gets its first real source file.
namespace ptd {
int image_placeholder = 0;
}  // namespace ptd
