//! `bench.svg`: fence and get-all against N, log-log, one line per
//! configuration (medians over the ok runs), and job start-up against N
//! when it was run, under one legend row.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::configs::{Config, Kind};
use crate::launch;
use crate::record::{summarize, Record};

pub const WIDTH: u32 = 1200;
pub const HEIGHT: u32 = 500;

fn color(c: Config) -> RGBColor {
    match c {
        Config::FastpmiShm => RGBColor(0x1f, 0x77, 0xb4),
        Config::FastpmiShmNoYield => RGBColor(0x9e, 0xc6, 0xe8),
        Config::FastpmiSocket => RGBColor(0xff, 0x7f, 0x0e),
        Config::Hydra => RGBColor(0xd6, 0x27, 0x28),
        Config::SlurmPmi2 => RGBColor(0x2c, 0xa0, 0x2c),
        Config::FutexFloor => RGBColor(0x33, 0x33, 0x33),
        Config::MpichFastpmi | Config::MpichHydra => RGBColor(0x94, 0x67, 0xbd),
        Config::SpawnFastpmi | Config::SpawnHydra5 => RGBColor(0x8c, 0x56, 0x4b),
        Config::LaunchFloor => RGBColor(0x77, 0x77, 0x77),
        Config::LaunchFastpmi => RGBColor(0x17, 0xbe, 0xcf),
        Config::LaunchShm => RGBColor(0x1f, 0x77, 0xb4),
        Config::LaunchSocket => RGBColor(0x2c, 0xa0, 0x2c),
        Config::LaunchHydra => RGBColor(0xd6, 0x27, 0x28),
        Config::LaunchHydraPmi => RGBColor(0xe3, 0x77, 0xc2),
        Config::GroupFence => RGBColor(0xbc, 0xbd, 0x22),
        Config::PsQuiet | Config::PsPolled | Config::PsSitting => RGBColor(0x7f, 0x7f, 0x7f),
        Config::Placement(_) => RGBColor(0x17, 0xbe, 0xcf),
        Config::NestSrun => RGBColor(0x2c, 0xa0, 0x2c),
        Config::NestNodes => RGBColor(0x1f, 0x77, 0xb4),
        Config::DeathDetect => RGBColor(0xd6, 0x27, 0x28),
        Config::UlfmFastpmi => RGBColor(0x1f, 0x77, 0xb4),
        Config::UlfmMpirun => RGBColor(0xd6, 0x27, 0x28),
        Config::PythonFastpmi => RGBColor(0x1f, 0x77, 0xb4),
        Config::PythonMpiexec => RGBColor(0xd6, 0x27, 0x28),
    }
}

type Series = (Config, Vec<(f64, f64)>);

/// Median of `metric` (µs) in ms for every N that has an ok run; configs
/// with no point at all get no series (and no legend entry).
fn series(
    records: &[Record],
    present: &[Config],
    sizes: &[u32],
    kinds: &[Kind],
    metric: &dyn Fn(Config) -> &'static str,
) -> Vec<Series> {
    present
        .iter()
        .filter(|c| kinds.contains(&c.kind()))
        .filter_map(|&c| {
            let pts: Vec<(f64, f64)> = sizes
                .iter()
                .filter_map(|&n| {
                    let s = summarize(records, c, n, |r| r.get(metric(c)))?;
                    // Log scale: a zero (below the clock's resolution) has no place.
                    (s.median > 0.0).then_some((f64::from(n), s.median / 1e3))
                })
                .collect();
            (!pts.is_empty()).then_some((c, pts))
        })
        .collect()
}

fn err(e: impl std::fmt::Display) -> String {
    format!("plot: {e}")
}

/// Tick values for a log axis over `[lo, hi]`: 1-2-5 per decade, or a finer
/// 1-1.5-2-3-5-7 when the range is too narrow for three such ticks.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    for (mults, enough) in [
        (&[1.0, 2.0, 5.0][..], 3),
        (&[1.0, 1.5, 2.0, 3.0, 5.0, 7.0], 2),
    ] {
        let mut v = Vec::new();
        let mut exp = lo.log10().floor() as i32;
        while 10f64.powi(exp) <= hi {
            for m in mults {
                // powi of a negative exponent is inexact; compare with slack.
                let t = m * 10f64.powi(exp);
                if t >= lo * (1.0 - 1e-9) && t <= hi * (1.0 + 1e-9) {
                    v.push(t);
                }
            }
            exp += 1;
        }
        if v.len() >= enough {
            return v;
        }
    }
    vec![lo, hi]
}

/// A tick label without float noise (0.3, not 0.30000000000000004).
fn tick_label(y: f64) -> String {
    let decimals = (-y.log10()).ceil().max(0.0) as usize;
    format!("{y:.decimals$}")
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    data: &[Series],
    sizes: &[u32],
) -> Result<(), String> {
    let xs: Vec<f64> = sizes.iter().map(|&n| f64::from(n)).collect();
    let (x0, x1) = (
        xs.iter().copied().fold(f64::INFINITY, f64::min),
        xs.iter().copied().fold(0.0, f64::max),
    );
    let ys = data.iter().flat_map(|(_, p)| p.iter().map(|&(_, y)| y));
    let (mut y0, mut y1) = (
        ys.clone().fold(f64::INFINITY, f64::min),
        ys.fold(0.0, f64::max),
    );
    if !y0.is_finite() || y1 <= 0.0 {
        (y0, y1) = (0.001, 1.0);
    }
    let (y0, y1) = (y0 / 2.0, y1 * 2.0);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            // Ticks exactly at the rank counts that were run.
            (x0 / 1.5..x1 * 1.5).log_scale().with_key_points(xs.clone()),
            (y0..y1).log_scale().with_key_points(log_ticks(y0, y1)),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("ranks (N)")
        .y_desc("ms (median over runs)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| tick_label(*y))
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
        .draw()
        .map_err(err)?;
    if data.is_empty() {
        chart
            .draw_series(std::iter::once(Text::new(
                "no data",
                ((x0 * x1).sqrt(), (y0 * y1).sqrt()),
                ("sans-serif", 16),
            )))
            .map_err(err)?;
    }
    for (c, pts) in data {
        let col = color(*c);
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), col.stroke_width(2)))
            .map_err(err)?;
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, col.filled())))
            .map_err(err)?;
    }
    Ok(())
}

/// One legend row over both panels, so no legend box hides a data point:
/// a line sample and the configuration's name per series.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    configs: &[Config],
) -> Result<(), String> {
    let mut x = 90;
    for &c in configs {
        let col = color(c);
        area.draw(&PathElement::new(
            vec![(x, 22), (x + 28, 22)],
            col.stroke_width(3),
        ))
        .map_err(err)?;
        area.draw(&Circle::new((x + 14, 22), 4, col.filled()))
            .map_err(err)?;
        area.draw(&Text::new(c.name(), (x + 36, 15), ("sans-serif", 15)))
            .map_err(err)?;
        x += 36 + 9 * c.name().len() as i32 + 40;
    }
    Ok(())
}

pub const LEGEND_HEIGHT: u32 = 40;

/// The SVG document: a legend row naming every configuration that has a
/// series (in either panel), then the fence and get-all panels.
pub fn svg(
    records: &[Record],
    present: &[Config],
    sizes: &[u32],
    launch_sizes: &[u32],
    fence_loop: bool,
) -> Result<String, String> {
    // The fence panel shows the steady-state fence (the rank program's loop,
    // the floor's per-fence time) unless the loop was turned off.
    let fence_key = move |c: Config| {
        if fence_loop || c.kind() == Kind::Floor {
            "fence_loop_us"
        } else {
            "fence2_us"
        }
    };
    let fence = series(
        records,
        present,
        sizes,
        &[Kind::Exchange, Kind::Floor],
        &fence_key,
    );
    let getall = series(records, present, sizes, &[Kind::Exchange], &|_| "getall_us");
    let launch = series(records, present, launch_sizes, &[Kind::Launch], &|_| {
        launch::METRIC
    });
    let fence_title = if fence_loop {
        "fence (rank 0, mean of back-to-back fences)"
    } else {
        "fence (rank 0, 2nd fence; floor: per fence)"
    };
    let plotted: Vec<Config> = present
        .iter()
        .copied()
        .filter(|c| {
            fence
                .iter()
                .chain(&getall)
                .chain(&launch)
                .any(|(x, _)| x == c)
        })
        .collect();
    // A third panel of the same width when start-up was measured.
    let panels = if launch.is_empty() { 2 } else { 3 };
    let width = WIDTH / 2 * panels;
    let mut buf = String::new();
    {
        let root =
            SVGBackend::with_string(&mut buf, (width, HEIGHT + LEGEND_HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, body) = root.split_vertically(LEGEND_HEIGHT);
        legend(&top, &plotted)?;
        let (left, rest) = body.split_horizontally(WIDTH / 2);
        let (middle, right) = rest.split_horizontally(WIDTH / 2);
        panel(&left, fence_title, &fence, sizes)?;
        panel(&middle, "get-all (rank 0, all N keys)", &getall, sizes)?;
        if !launch.is_empty() {
            panel(
                &right,
                "job start-up (launch to exit)",
                &launch,
                launch_sizes,
            )?;
        }
        root.present().map_err(err)?;
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks() {
        let t = log_ticks(0.005, 0.6);
        let want = [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5];
        assert_eq!(t.len(), want.len(), "{t:?}");
        assert!(
            t.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12),
            "{t:?}"
        );
        assert_eq!(log_ticks(1.2, 2.5), [1.5, 2.0]);
        assert_eq!(log_ticks(1.2, 1.3), [1.2, 1.3]);
        assert_eq!(tick_label(0.30000000000000004), "0.3");
        assert_eq!(tick_label(0.02), "0.02");
        assert_eq!(tick_label(50.0), "50");
    }
}
