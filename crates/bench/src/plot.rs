//! PNG plots: throughput over time and the latency CDF.
//!
//! `plotters` draws with its bitmap backend only and renders text with
//! `ab_glyph` from a font compiled into the binary (DejaVu Sans Mono, see
//! `assets/DejaVu-LICENSE.txt`), so plotting needs neither fontconfig nor
//! any font installed on the machine.

use crate::report::PhaseResult;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSansMono.ttf");

fn register_font() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        for family in ["sans-serif", "serif", "monospace"] {
            if plotters::style::register_font(family, FontStyle::Normal, FONT).is_err() {
                panic!("the embedded font is invalid");
            }
        }
    });
}

type PlotResult = Result<(), Box<dyn std::error::Error>>;

const SIZE: (u32, u32) = (1000, 600);

fn color(i: usize) -> RGBColor {
    // Tableau's 10 colours, then darker variants of six of them.
    const PALETTE: [RGBColor; 16] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
        RGBColor(16, 60, 90),
        RGBColor(128, 64, 7),
        RGBColor(22, 80, 22),
        RGBColor(107, 20, 20),
        RGBColor(74, 52, 95),
        RGBColor(12, 95, 104),
    ];
    PALETTE[i % PALETTE.len()]
}

/// One line per (server, phase): operations per second over time.
pub fn throughput(path: &Path, results: &[PhaseResult]) -> PlotResult {
    register_font();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let t_max = results
        .iter()
        .flat_map(|r| r.timeline.last().map(|p| p.t_sec))
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let y_max = results
        .iter()
        .flat_map(|r| r.timeline.iter().map(|p| p.ops_per_sec))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption("Throughput over time", ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("operations / s")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    for (i, r) in results.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(
                r.timeline.iter().map(|p| (p.t_sec, p.ops_per_sec)),
                c.stroke_width(2),
            ))?
            .label(format!("{} {} {} B", r.server, r.phase, r.value_size))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// One line per (server, phase, operation type): the fraction of
/// operations at or below a latency, latency on a log scale.
pub fn latency_cdf(path: &Path, results: &[PhaseResult]) -> PlotResult {
    register_font();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let lat = results
        .iter()
        .flat_map(|r| r.cdf.iter().flat_map(|(_, pts)| pts.iter().map(|p| p.0)));
    let (lo, hi) = lat.fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if hi <= 0.0 {
        (1.0, 10.0)
    } else {
        ((lo * 0.8).max(1.0), (hi * 1.25).max(lo * 10.0))
    };
    let mut chart = ChartBuilder::on(&root)
        .caption("Latency CDF", ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_desc("latency (µs, log scale)")
        .y_desc("fraction of operations")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    let mut i = 0;
    for r in results {
        for (op, pts) in &r.cdf {
            let c = color(i);
            i += 1;
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?
                .label(format!("{} {} {} B {op}", r.server, r.phase, r.value_size))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
