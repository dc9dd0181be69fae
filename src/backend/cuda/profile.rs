//! Stage timings of the last GPU call, measured with CUDA events on the stream, so benchmarks
//! can report device-only time beside end-to-end time.

use std::sync::Mutex;

use cudarc::driver::CudaEvent;

use super::Gpu;
use crate::error::Result;

static LAST: Mutex<Vec<(String, f64)>> = Mutex::new(Vec::new());

/// Marks on the stream; `finish` turns consecutive marks into named durations.
pub struct Timeline {
    marks: Vec<(&'static str, CudaEvent)>,
}

impl Timeline {
    pub fn start(gpu: &Gpu) -> Result<Self> {
        let mut t = Timeline { marks: Vec::new() };
        t.mark(gpu, "start")?;
        Ok(t)
    }

    /// Record that the stage called `name` ends here.
    pub fn mark(&mut self, gpu: &Gpu, name: &'static str) -> Result<()> {
        let ev = gpu
            .ctx
            .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        ev.record(&gpu.stream)?;
        self.marks.push((name, ev));
        Ok(())
    }

    /// Wait for the stream and publish the stage durations (milliseconds).
    pub fn finish(self) -> Result<()> {
        let mut stages: Vec<(String, f64)> = Vec::new();
        for w in self.marks.windows(2) {
            let ms = w[0].1.elapsed_ms(&w[1].1)? as f64;
            match stages.iter_mut().find(|(n, _)| n == w[1].0) {
                Some(s) => s.1 += ms,
                None => stages.push((w[1].0.to_string(), ms)),
            }
        }
        if let (Some(first), Some(last)) = (self.marks.first(), self.marks.last()) {
            stages.push(("total".into(), first.1.elapsed_ms(&last.1)? as f64));
        }
        *LAST.lock().unwrap_or_else(|e| e.into_inner()) = stages;
        Ok(())
    }
}

/// The stage timings (name, ms) of the last GPU call that recorded a timeline.
pub fn last() -> Vec<(String, f64)> {
    LAST.lock().unwrap_or_else(|e| e.into_inner()).clone()
}
