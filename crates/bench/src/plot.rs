//! PNG plots with plotters (no Python). Text needs a TrueType font: DejaVu Sans from the system
//! (`fonts-dejavu-core` on Debian), registered once.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

/// One named line of a chart.
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// Pixels right of a line chart's plotting area that its legend takes.
const LEGEND_WIDTH: u32 = 300;

/// A figure a paper gives, drawn beside the model's lines as a cross numbered by its claim.
pub struct Mark {
    pub claim: usize,
    pub x: f64,
    pub y: f64,
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

/// Values spanning more than this factor get a logarithmic axis.
const LOG_SPAN: f64 = 100.0;

/// A y value as the axis holds it (log10 on a logarithmic axis), and back for its label.
fn to_axis(value: f64, log: bool) -> f64 {
    if log {
        value.max(f64::MIN_POSITIVE).log10()
    } else {
        value
    }
}

/// A tick's label: short, and a power of ten's value on a logarithmic axis.
fn tick_label(value: f64, log: bool) -> String {
    let value = if log { 10f64.powf(value) } else { value };
    match value.abs() {
        0.0 => "0".to_string(),
        v if v >= 100.0 => format!("{value:.0}"),
        v if v >= 1.0 => format!("{value:.1}"),
        _ => format!("{value:.3}"),
    }
}

/// The largest font size up to `largest` at which `title` fits in `width` pixels: a chart centres its caption
/// over the plotting area, so a long title in the full size would run off the picture's left edge.
fn caption_size<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, title: &str, largest: u32, width: u32) -> u32 {
    let fits = |size: u32| {
        let style = TextStyle::from(("sans-serif", f64::from(size)).into_font());
        root.estimate_text_size(title, &style).is_ok_and(|(text_width, _)| text_width <= width)
    };
    (10..=largest).rev().find(|&size| fits(size)).unwrap_or(10)
}

/// A chart of `lines` into `path`: lines over x, or bars when every series has one point (a one-point line
/// shows nothing). Integer x values get integer ticks, x values spanning more than 100x a base-2 logarithmic axis
/// (queue depths and block sizes go in powers of two), y values spanning more than 100x a logarithmic axis, and
/// series drawn later are thinner so that coinciding ones all show.
pub fn plot_lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
    marks: &[Mark],
) -> Result<(), String> {
    font()?;
    if lines.iter().all(|line| line.points.len() <= 1) {
        return plot_bars(path, title, y_label, lines);
    }
    let ys = || lines.iter().flat_map(|line| line.points.iter().map(|p| p.1)).chain(marks.iter().map(|mark| mark.y));
    let positive: Vec<f64> = ys().filter(|&y| y > 0.0).collect();
    let (smallest, largest) = positive.iter().fold((f64::MAX, 0.0f64), |(low, high), &y| (low.min(y), high.max(y)));
    let log = positive.len() == ys().count() && largest / smallest > LOG_SPAN;
    let xs = || lines.iter().flat_map(|line| line.points.iter().map(|p| p.0)).chain(marks.iter().map(|mark| mark.x));
    let (x_min, x_max) = xs().fold((f64::MAX, f64::MIN), |(low, high), x| (low.min(x), high.max(x)));
    let x_log = x_min > 0.0 && x_max / x_min > LOG_SPAN;
    let (x_low, x_high) = if x_log { (x_min.log2().floor(), x_max.log2().ceil()) } else { range(xs()) };
    let (y_low, y_high) =
        if log { (to_axis(smallest, true).floor(), to_axis(largest, true).ceil()) } else { range(ys()) };
    let integer_x = lines.iter().flat_map(|line| &line.points).all(|p| p.0.fract() == 0.0);
    // The legend sits right of the plotting area, where it covers no data.
    let root = BitMapBackend::new(path, (900 + LEGEND_WIDTH, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", caption_size(&root, title, 20, 900 - 32)))
        .margin(16)
        .margin_right(16 + LEGEND_WIDTH)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x_low..x_high, y_low..y_high)
        .map_err(|e| e.to_string())?;
    let x_ticks = if integer_x || x_log { ((x_high - x_low).floor() as usize + 1).clamp(2, 12) } else { 10 };
    let x_desc = if x_log { format!("{x_label}, log scale") } else { x_label.to_string() };
    let y_desc = if log { format!("{y_label}, log scale") } else { y_label.to_string() };
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(x_ticks)
        .x_label_formatter(&|x| match (x_log, integer_x) {
            (true, true) => format!("{:.0}", x.exp2()),
            (true, false) => format!("{}", x.exp2()),
            (false, true) => format!("{x:.0}"),
            (false, false) => format!("{x}"),
        })
        .y_labels(if log { (y_high - y_low) as usize + 1 } else { 10 })
        .y_label_formatter(&|y| tick_label(*y, log))
        .draw()
        .map_err(|e| e.to_string())?;
    for (index, line) in lines.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        let width = (2 * (lines.len() - index)).clamp(2, 8) as u32;
        let points: Vec<(f64, f64)> =
            line.points.iter().map(|&(x, y)| (if x_log { x.log2() } else { x }, to_axis(y, log))).collect();
        chart
            .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(width)))
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, width + 1, color.filled())))
            .map_err(|e| e.to_string())?;
    }
    let font = ("sans-serif", 15).into_font().color(&BLACK);
    // Claims on one spot share a cross and list their numbers: (pixel, chart coordinates, numbers).
    type Spot = ((i32, i32), (f64, f64), Vec<String>);
    let mut spots: Vec<Spot> = Vec::new();
    for mark in marks {
        let at = (if x_log { mark.x.log2() } else { mark.x }, to_axis(mark.y, log));
        let pixel = chart.backend_coord(&at);
        match spots.iter_mut().find(|(spot, ..)| *spot == pixel) {
            Some((.., numbers)) => numbers.push(mark.claim.to_string()),
            None => spots.push((pixel, at, vec![mark.claim.to_string()])),
        }
    }
    for ((x, y), at, numbers) in spots {
        chart.draw_series([Cross::new(at, 9, BLACK.stroke_width(3))]).map_err(|e| e.to_string())?;
        root.draw(&Text::new(numbers.join(", "), (x + 9, y - 22), font.clone())).map_err(|e| e.to_string())?;
    }
    // The legend, right of the plotting area: a swatch and a label a row.
    let (left, top) = chart.plotting_area().get_base_pixel();
    let (plot_width, _) = chart.plotting_area().dim_in_pixel();
    let x = left + plot_width as i32 + 16;
    for (row, line) in lines.iter().enumerate() {
        let y = top + 10 + 20 * row as i32;
        let color = COLORS[row % COLORS.len()];
        root.draw(&PathElement::new(vec![(x, y), (x + 22, y)], color.stroke_width(4))).map_err(|e| e.to_string())?;
        root.draw(&Text::new(line.label.clone(), (x + 30, y - 8), font.clone())).map_err(|e| e.to_string())?;
    }
    if !marks.is_empty() {
        let y = top + 10 + 20 * lines.len() as i32;
        root.draw(&Cross::new((x + 11, y), 6, BLACK.stroke_width(2))).map_err(|e| e.to_string())?;
        let label = "the paper's figures, by claim number";
        root.draw(&Text::new(label, (x + 30, y - 8), font.clone())).map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| format!("{}: {e}", path.display()))
}

/// One bar per series, for figures of a single point.
fn plot_bars(path: &Path, title: &str, y_label: &str, lines: &[Line]) -> Result<(), String> {
    let high = lines.iter().flat_map(|line| line.points.iter().map(|p| p.1)).fold(0.0f64, f64::max);
    let high = if high > 0.0 { high * 1.1 } else { 1.0 };
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let count = lines.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", caption_size(&root, title, 20, 900 - 32)))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5..count - 0.5, 0.0..high)
        .map_err(|e| e.to_string())?;
    let labels: Vec<String> = lines.iter().map(|line| line.label.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(lines.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let index = x.round();
            if (x - index).abs() < 1e-6 && index >= 0.0 {
                labels.get(index as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(y_label)
        .y_label_formatter(&|y| tick_label(*y, false))
        .draw()
        .map_err(|e| e.to_string())?;
    for (index, line) in lines.iter().enumerate() {
        let Some(&(_, y)) = line.points.first() else { continue };
        let x = index as f64;
        chart
            .draw_series([Rectangle::new([(x - 0.3, 0.0), (x + 0.3, y)], COLORS[index % COLORS.len()].filled())])
            .map_err(|e| e.to_string())?;
    }
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
        .caption(title, ("sans-serif", caption_size(&root, title, 18, 700 - 32)))
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

/// One zone of a zone map: its name, its capacity and written bytes, and the extents its owners (files) hold
/// in it as (offset in the zone, bytes, owner index).
pub struct ZoneStrip {
    pub label: String,
    pub capacity: u64,
    pub written: u64,
    pub extents: Vec<(u64, u64, usize)>,
}

/// Rows of a zone map at most: past it the map draws the first ones and says how many it left out.
const ZONE_MAP_ROWS: usize = 512;

/// A zone-utilization map into `path`: a strip per zone as wide as its capacity, white where nothing is written,
/// grey where written data is dead, and each owner's live extents in a colour of its own, so that which files
/// share which zones, and how much of each zone is still live, shows at a glance (zns-tools' zone maps). The
/// legend names the owners that hold the most bytes.
pub fn plot_zone_map(path: &Path, title: &str, strips: &[ZoneStrip], owners: &[String]) -> Result<(), String> {
    font()?;
    const ROW: u32 = 12;
    const LEFT: i32 = 90;
    const BAR: i32 = 800;
    const LEGEND_ROWS: usize = 24;
    let shown = &strips[..strips.len().min(ZONE_MAP_ROWS)];
    let height = 60 + ROW * shown.len() as u32 + 20;
    let legend_height = 60 + 18 * (LEGEND_ROWS as u32 + 2);
    let root =
        BitMapBackend::new(path, (LEFT as u32 + BAR as u32 + 330, height.max(legend_height))).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let text = |size| ("sans-serif", size).into_font().color(&BLACK);
    let drawn = |result: Result<(), DrawingAreaErrorKind<_>>| result.map_err(|e| e.to_string());
    drawn(root.draw(&Text::new(title.to_string(), (10, 10), text(18))))?;
    let colour = |owner: usize| Palette99::pick(owner).to_rgba();
    let grey = RGBColor(190, 190, 190);
    for (row, strip) in shown.iter().enumerate() {
        let top = 50 + row as i32 * ROW as i32;
        let x = |offset: u64| LEFT + (offset as f64 / strip.capacity.max(1) as f64 * f64::from(BAR)).round() as i32;
        drawn(root.draw(&Text::new(strip.label.clone(), (8, top), text(11))))?;
        drawn(root.draw(&Rectangle::new([(LEFT, top), (LEFT + BAR, top + ROW as i32 - 2)], grey.mix(0.15).filled())))?;
        let written_end = x(strip.written.min(strip.capacity));
        drawn(root.draw(&Rectangle::new([(LEFT, top), (written_end, top + ROW as i32 - 2)], grey.filled())))?;
        for &(offset, bytes, owner) in &strip.extents {
            let (from, to) = (x(offset), x(offset + bytes).max(x(offset) + 1));
            drawn(root.draw(&Rectangle::new([(from, top), (to, top + ROW as i32 - 2)], colour(owner).filled())))?;
        }
    }
    if strips.len() > shown.len() {
        let note = format!("{} more zones not drawn", strips.len() - shown.len());
        drawn(root.draw(&Text::new(note, (LEFT, 50 + ROW as i32 * shown.len() as i32 + 4), text(12))))?;
    }
    // The legend: the owners holding the most live bytes.
    let mut held = vec![0u64; owners.len()];
    for strip in strips {
        for &(_, bytes, owner) in &strip.extents {
            held[owner] += bytes;
        }
    }
    let mut order: Vec<usize> = (0..owners.len()).filter(|&owner| held[owner] > 0).collect();
    order.sort_by_key(|&owner| (std::cmp::Reverse(held[owner]), owner));
    let legend_x = LEFT + BAR + 20;
    drawn(root.draw(&Text::new("grey: written, dead".to_string(), (legend_x, 30), text(12))))?;
    for (row, &owner) in order.iter().take(LEGEND_ROWS).enumerate() {
        let top = 50 + row as i32 * 18;
        drawn(root.draw(&Rectangle::new([(legend_x, top), (legend_x + 12, top + 12)], colour(owner).filled())))?;
        let label = format!("{} ({:.1} MiB)", owners[owner], held[owner] as f64 / f64::from(1 << 20));
        drawn(root.draw(&Text::new(label, (legend_x + 18, top), text(12))))?;
    }
    if order.len() > LEGEND_ROWS {
        let note = format!("and {} more", order.len() - LEGEND_ROWS);
        drawn(root.draw(&Text::new(note, (legend_x, 50 + LEGEND_ROWS as i32 * 18), text(12))))?;
    }
    root.present().map_err(|e| format!("{}: {e}", path.display()))
}

/// One zone of a zone timeline: its name, the share of its capacity written at the end of each interval, and
/// the resets in each.
pub struct TimelineRow {
    pub label: String,
    pub fill: Vec<f64>,
    pub resets: Vec<u32>,
}

/// Zones over time into `path`: a strip per zone, a column per interval of the `span_s` seconds, from white
/// (empty) to dark blue (full), with a red mark in an interval where the zone was reset.
pub fn plot_zone_timeline(path: &Path, title: &str, span_s: f64, rows: &[TimelineRow]) -> Result<(), String> {
    font()?;
    const ROW: u32 = 12;
    const LEFT: i32 = 90;
    const WIDTH: i32 = 900;
    let shown = &rows[..rows.len().min(ZONE_MAP_ROWS)];
    let height = 60 + ROW * shown.len() as u32 + 40;
    let root = BitMapBackend::new(path, (LEFT as u32 + WIDTH as u32 + 20, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let text = |size| ("sans-serif", size).into_font().color(&BLACK);
    let drawn = |result: Result<(), DrawingAreaErrorKind<_>>| result.map_err(|e| e.to_string());
    drawn(root.draw(&Text::new(title.to_string(), (10, 10), text(16))))?;
    for (row, zone) in shown.iter().enumerate() {
        let top = 40 + row as i32 * ROW as i32;
        drawn(root.draw(&Text::new(zone.label.clone(), (8, top), text(11))))?;
        let columns = zone.fill.len().max(1);
        let x = |column: usize| LEFT + (column as f64 / columns as f64 * f64::from(WIDTH)).round() as i32;
        for (column, (&fill, &resets)) in zone.fill.iter().zip(&zone.resets).enumerate() {
            let shade = |full: u8| (255.0 - (255.0 - f64::from(full)) * fill.clamp(0.0, 1.0)).round() as u8;
            let colour = RGBColor(shade(20), shade(60), shade(160));
            let (from, to) = (x(column), x(column + 1).max(x(column) + 1));
            drawn(root.draw(&Rectangle::new([(from, top), (to, top + ROW as i32 - 2)], colour.filled())))?;
            if resets > 0 {
                drawn(root.draw(&Rectangle::new([(from, top), (from + 2, top + ROW as i32 - 2)], RED.filled())))?;
            }
        }
    }
    let bottom = 40 + ROW as i32 * shown.len() as i32 + 6;
    if rows.len() > shown.len() {
        let note = format!("{} more zones not drawn", rows.len() - shown.len());
        drawn(root.draw(&Text::new(note, (LEFT + 200, bottom), text(12))))?;
    }
    drawn(root.draw(&Text::new("0 s".to_string(), (LEFT, bottom), text(12))))?;
    drawn(root.draw(&Text::new(format!("{span_s:.3} s"), (LEFT + WIDTH - 50, bottom), text(12))))?;
    root.present().map_err(|e| format!("{}: {e}", path.display()))
}
