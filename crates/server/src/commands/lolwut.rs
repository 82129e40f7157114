//! LOLWUT [VERSION version] [...]: computer art and the version, as Redis
//! 7.0.15's `lolwut.c` / `lolwut5.c` answer it.
//!
//! `VERSION n` picks the art by `n` cast to a 32-bit unsigned number (as
//! Redis's `"%u.0.0"`): 5 draws Georg Nees's "Schotter" (a grid of squares
//! rotated and shifted more and more at random row after row, rendered in
//! Braille characters, 2x4 pixels each); 6 draws a city skyline of random
//! skyscrapers in the terminal's four grays (ANSI colour escapes, one
//! character a pixel); anything else, and no VERSION, answers only the
//! version line (7.0's own "unstable" LOLWUT). The drawings are random
//! where Redis's are (its `rand()`, our generator); version 5 with at most
//! two rows of squares and version 6 one row high are free of randomness,
//! so they are byte for byte Redis's.

use super::flags::*;
use super::{CommandSpec, Ctx};
use ferrokv_resp::Args;
use rand::Rng;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::new("lolwut", -1, READONLY | FAST, lolwut)
    .group("server")
    .since("5.0.0")
    .doc(
        "Display some computer art and the Redis version",
        "[VERSION version]",
    )];

/// LOLWUT [VERSION version] [columns [squares-per-row [squares-per-col]]]
fn lolwut(ctx: &mut Ctx, args: Args) {
    let mut rest = 1;
    let mut version: Option<u32> = None;
    if args.len() >= 3 && super::is(args.get(1), "version") {
        let Some(v) = super::parse_int(ctx, args.get(2)) else {
            return;
        };
        version = Some(v as u32);
        rest = 3;
    }
    let text = match version {
        Some(5) => {
            let mut params = [66i64, 8, 12];
            for (i, p) in params.iter_mut().enumerate() {
                if rest + i < args.len() {
                    let Some(v) = super::parse_int(ctx, args.get(rest + i)) else {
                        return;
                    };
                    *p = v;
                }
            }
            let cols = params[0].clamp(1, 1000) as usize;
            let per_row = params[1].clamp(1, 200) as usize;
            let per_col = params[2].clamp(1, 200) as usize;
            let canvas = schotter(&mut ctx.srv.rng, cols, per_row, per_col);
            let mut s = canvas.render();
            s.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
            s.push_str(crate::REDIS_COMPAT_VERSION);
            s.push('\n');
            s
        }
        Some(6) => {
            let mut params = [80i64, 20];
            for (i, p) in params.iter_mut().enumerate() {
                if rest + i < args.len() {
                    let Some(v) = super::parse_int(ctx, args.get(rest + i)) else {
                        return;
                    };
                    *p = v;
                }
            }
            let cols = params[0].clamp(1, 1000) as i32;
            let rows = params[1].clamp(1, 1000) as i32;
            let mut canvas = Canvas::new(cols, rows, WHITE);
            skyline(&mut ctx.srv.rng, &mut canvas);
            let mut s = canvas.render_grays();
            s.push_str("\nDedicated to the 8 bit game developers of past and present.\nOriginal 8 bit image from Plaguemon by hikikomori. Redis ver. ");
            s.push_str(crate::REDIS_COMPAT_VERSION);
            s.push('\n');
            s
        }
        _ => format!("Redis ver. {}\n", crate::REDIS_COMPAT_VERSION),
    };
    ctx.client.out.verbatim(text.as_bytes());
}

/// Version 6's background colour.
const WHITE: u8 = 3;

/// A pixel canvas: 0/1 for version 5, four grays (0 black .. 3 white)
/// for version 6.
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, background: u8) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![background; (width.max(0) * height.max(0)) as usize],
        }
    }

    fn draw(&mut self, x: i32, y: i32, color: u8) {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return;
        }
        self.pixels[(x + y * self.width) as usize] = color;
    }

    fn set(&mut self, x: i32, y: i32) {
        self.draw(x, y, 1);
    }

    /// The pixel's colour; 0 outside the canvas.
    fn color(&self, x: i32, y: i32) -> u8 {
        if x < 0 || x >= self.width || y < 0 || y >= self.height {
            return 0;
        }
        self.pixels[(x + y * self.width) as usize]
    }

    fn get(&self, x: i32, y: i32) -> bool {
        self.color(x, y) != 0
    }

    /// One space a pixel, its foreground and background set to its gray.
    fn render_grays(&self) -> String {
        let mut s = String::new();
        for y in 0..self.height {
            for x in 0..self.width {
                let escape = match self.color(x, y) {
                    1 => "0;90;100m",
                    2 => "0;37;47m",
                    3 => "0;97;107m",
                    _ => "0;30;40m",
                };
                s.push_str("\x1b[");
                s.push_str(escape);
                s.push_str(" \x1b[0m");
            }
            if y != self.height - 1 {
                s.push('\n');
            }
        }
        s
    }

    /// Bresenham's line, both ends included.
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32) {
        let dx = (x2 - x1).abs();
        let dy = (y2 - y1).abs();
        let sx = if x1 < x2 { 1 } else { -1 };
        let sy = if y1 < y2 { 1 } else { -1 };
        let mut err = dx - dy;
        loop {
            self.set(x1, y1);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square centred on (x, y), `size` across once rotated by `angle`
    /// (Redis computes in C floats; the corners are rounded to pixels).
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32) {
        // Redis's own literal for the square root of 2, in double as C
        // divides a float by it, then rounds back into the float.
        #[allow(clippy::approx_constant)]
        let size = ((size as f64 / 1.4142135623) as f32 as f64).round() as f32;
        let mut k = (std::f64::consts::FRAC_PI_4 + angle as f64) as f32;
        let mut px = [0i32; 4];
        let mut py = [0i32; 4];
        for j in 0..4 {
            // C: round(sin(k) * size + x) in double from float operands.
            px[j] = ((k as f64).sin() * size as f64 + x as f64).round() as i32;
            py[j] = ((k as f64).cos() * size as f64 + y as f64).round() as i32;
            k = (k as f64 + std::f64::consts::FRAC_PI_2) as f32;
        }
        for j in 0..4 {
            self.line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4]);
        }
    }

    /// Braille characters, one per 2x4 pixels, rows joined by newlines.
    fn render(&self) -> String {
        let mut s = String::new();
        let mut y = 0;
        while y < self.height {
            let mut x = 0;
            while x < self.width {
                let bits = [
                    (0, 0),
                    (0, 1),
                    (0, 2),
                    (1, 0),
                    (1, 1),
                    (1, 2),
                    (0, 3),
                    (1, 3),
                ];
                let mut byte = 0u32;
                for (i, (dx, dy)) in bits.iter().enumerate() {
                    if self.get(x + dx, y + dy) {
                        byte |= 1 << i;
                    }
                }
                s.push(char::from_u32(0x2800 + byte).expect("a Braille pattern"));
                x += 2;
            }
            if y != self.height - 1 {
                s.push('\n');
            }
            y += 4;
        }
        s
    }
}

/// Redis's `lwDrawSchotter`: rows below the second get a random rotation
/// and shift that grow with the row.
fn schotter(rng: &mut impl Rng, cols: usize, per_row: usize, per_col: usize) -> Canvas {
    let width = cols as i32 * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32) as i32 + padding * 2;
    let mut canvas = Canvas::new(width, height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle = 0f32;
            if y > 1 {
                let mut r = [0f32; 3];
                for v in r.iter_mut() {
                    *v = rng.gen::<f32>() / per_col as f32 * y as f32;
                }
                for v in r.iter_mut() {
                    if rng.gen::<bool>() {
                        *v = -*v;
                    }
                }
                angle = r[0];
                // C: `sx += r2*square_side/3` truncates the float sum.
                sx = (sx as f32 + r[1] * side / 3.0) as i32;
                sy = (sy as f32 + r[2] * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle);
        }
    }
    canvas
}

/// One skyscraper of version 6's skyline.
struct Skyscraper {
    xoff: i32,
    width: i32,
    height: i32,
    windows: bool,
    color: u8,
}

/// A C `rand() % n` stand-in: uniform in `0..n` (n > 0).
fn below(rng: &mut impl Rng, n: i32) -> i32 {
    rng.gen_range(0..n.max(1))
}

/// Draws a skyscraper standing on the bottom row: its roof two pixels
/// narrower on each side, windows (two pixels wide, one tall, in one of
/// the two grays other than its own) inside its borders.
fn skyscraper(rng: &mut impl Rng, canvas: &mut Canvas, s: &Skyscraper) {
    let bottom = canvas.height - 1;
    let top = bottom - s.height + 1;
    let mut y = bottom;
    while y >= top {
        for x in s.xoff..s.xoff + s.width {
            if y == top && (x <= s.xoff + 1 || x >= s.xoff + s.width - 2) {
                continue;
            }
            let mut color = s.color;
            if s.windows
                && x > s.xoff + 1
                && x < s.xoff + s.width - 2
                && y > top + 1
                && y < bottom - 1
            {
                let relx = x - (s.xoff + 1);
                let rely = y - (top + 1);
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    loop {
                        color = 1 + below(rng, 2) as u8;
                        if color != s.color {
                            break;
                        }
                    }
                    // Both pixels of a window share its colour.
                    if relx % 2 != 0 {
                        color = canvas.color(x - 1, y);
                    }
                }
            }
            canvas.draw(x, y, color);
        }
        y -= 1;
    }
}

/// Version 6's skyline: two rows of background skyscrapers without
/// windows (the lighter gray behind), then the black ones with windows.
fn skyline(rng: &mut impl Rng, canvas: &mut Canvas) {
    let h = canvas.height;
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < canvas.width {
            offset += below(rng, 8);
            let width = 10 + below(rng, 9);
            // C: `h/2 + rand()%h/2` is `h/2 + (rand()%h)/2`.
            let height = if color == 2 {
                h / 2 + below(rng, h) / 2
            } else {
                h / 2 + below(rng, h) / 3
            };
            let s = Skyscraper {
                xoff: offset,
                width,
                height,
                windows: false,
                color,
            };
            skyscraper(rng, canvas, &s);
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut offset = -10;
    while offset < canvas.width {
        offset += below(rng, 8);
        let mut width = 5 + below(rng, 14);
        if width % 4 != 0 {
            width += width % 3;
        }
        let s = Skyscraper {
            xoff: offset,
            width,
            height: h / 3 + below(rng, h) / 2,
            windows: true,
            color: 0,
        };
        skyscraper(rng, canvas, &s);
        offset += width + 5;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_square_renders_as_redis_draws_it() {
        let mut rng = rand::rngs::mock::StepRng::new(0, 1);
        let c = schotter(&mut rng, 1, 1, 1);
        // Two pixels wide, no padding: one Braille cell per four rows.
        assert_eq!(c.render(), "\u{280b}\n");
    }
}
