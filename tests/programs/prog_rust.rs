// Rust names as their author writes them: a generic method instantiated twice, a closure
// called through `dyn Fn`, and a generic function taking a closure. Built with rustc's
// legacy symbols and with v0 symbols (tests/programs/CMakeLists.txt).
struct Point<T> {
    x: T,
    y: T,
}

impl<T: std::ops::Add<Output = T> + Copy> Point<T> {
    #[inline(never)]
    fn sum(&self) -> T {
        self.x + self.y
    }
}

#[inline(never)]
fn apply(f: &dyn Fn(u64) -> u64, n: u64) -> u64 {
    f(n)
}

#[inline(never)]
fn fold_with<F: Fn(u64, u64) -> u64>(f: F, n: u64) -> u64 {
    (0..n).fold(0, |acc, i| f(acc, i))
}

fn main() {
    // From the command line, so that nothing is computed at compile time.
    let argc = std::env::args().count() as u64;
    let p = Point { x: argc, y: 2 };
    let q = Point { x: argc as f64 * 0.5, y: 0.25 };
    let k = argc + 2;
    let mut total = 0u64;
    let mut ftotal = 0f64;
    // Chosen at run time: the closure stays a function of its own, called through its vtable.
    let add_one = |v: u64| v + 1;
    let scale = |v: u64| v * k + p.sum();
    let f: &dyn Fn(u64) -> u64 = if argc > 5 { &add_one } else { &scale };
    for i in 0..30 {
        total += apply(f, i);
        ftotal += q.sum();
    }
    total += fold_with(|a, b| a ^ (b * k), 20);
    println!("{} {}", total, ftotal);
}
