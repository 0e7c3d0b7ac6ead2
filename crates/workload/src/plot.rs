//! PNG plots with plotters (no Python). Text needs a TrueType font: DejaVu Sans from the system
//! (`fonts-dejavu-core` on Debian), registered once.

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

/// One named line of a chart.
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// Registers DejaVu Sans as plotters' "sans-serif" the first time, or says why it cannot.
fn font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let bytes = FONT_PATHS
                .iter()
                .find_map(|path| std::fs::read(path).ok())
                .ok_or_else(|| format!("no font for plots: install fonts-dejavu-core ({} not found)", FONT_PATHS[0]))?;
            let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            register_font("sans-serif", FontStyle::Normal, leaked)
                .map_err(|_| "DejaVu Sans could not be loaded".to_string())
        })
        .clone()
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn range(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let low = values.clone().fold(f64::MAX, f64::min);
    let high = values.fold(f64::MIN, f64::max);
    if low > high {
        (0.0, 1.0)
    } else {
        (0.0f64.min(low), if high > low { high * 1.08 } else { high + 1.0 })
    }
}

/// A line chart of `lines` into `path`.
pub fn plot_lines(path: &Path, title: &str, x_label: &str, y_label: &str, lines: &[Line]) -> Result<(), String> {
    font()?;
    let (x_low, x_high) = range(lines.iter().flat_map(|line| line.points.iter().map(|p| p.0)));
    let (y_low, y_high) = range(lines.iter().flat_map(|line| line.points.iter().map(|p| p.1)));
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x_low..x_high, y_low..y_high)
        .map_err(|e| e.to_string())?;
    chart.configure_mesh().x_desc(x_label).y_desc(y_label).draw().map_err(|e| e.to_string())?;
    for (index, line) in lines.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        chart
            .draw_series(LineSeries::new(line.points.iter().copied(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(line.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        chart.draw_series(line.points.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| format!("{}: {e}", path.display()))
}

/// A scatter of (measured, model) pairs with the line y = x, into `path`.
pub fn plot_scatter(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    points: &[(f64, f64)],
) -> Result<(), String> {
    font()?;
    let high = points.iter().flat_map(|&(a, b)| [a, b]).fold(1.0f64, f64::max) * 1.1;
    let root = BitMapBackend::new(path, (700, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..high, 0.0..high)
        .map_err(|e| e.to_string())?;
    chart.configure_mesh().x_desc(x_label).y_desc(y_label).draw().map_err(|e| e.to_string())?;
    chart.draw_series(LineSeries::new([(0.0, 0.0), (high, high)], BLACK.mix(0.4))).map_err(|e| e.to_string())?;
    chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, COLORS[0].filled()))).map_err(|e| e.to_string())?;
    root.present().map_err(|e| format!("{}: {e}", path.display()))
}
