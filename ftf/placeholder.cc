// Replaced as the module gets its first real source file.
namespace ptd {
int ftf_placeholder = 0;
}  // namespace ptd
