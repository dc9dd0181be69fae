//! Stage timings of the last GPU call, measured with CUDA events on the stream, so benchmarks
//! can report device-only time beside end-to-end time.

use std::sync::{Mutex, OnceLock};

use cudarc::driver::{sys as dsys, CudaEvent};

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
            let ms = elapsed_ms(&w[0].1, &w[1].1)? as f64;
            match stages.iter_mut().find(|(n, _)| n == w[1].0) {
                Some(s) => s.1 += ms,
                None => stages.push((w[1].0.to_string(), ms)),
            }
        }
        if let (Some(first), Some(last)) = (self.marks.first(), self.marks.last()) {
            stages.push(("total".into(), elapsed_ms(&first.1, &last.1)? as f64));
        }
        *LAST.lock().unwrap_or_else(|e| e.into_inner()) = stages;
        Ok(())
    }
}

type ElapsedFn = unsafe extern "C" fn(*mut f32, dsys::CUevent, dsys::CUevent) -> dsys::CUresult;

/// Milliseconds from `start` to `end`. cudarc's `elapsed_ms` (built for CUDA 13) calls
/// cuEventElapsedTime_v2, which drivers before CUDA 12.8 lack (cudarc panics on a missing
/// symbol): use the _v2 entry point where the driver has it, else the original one (the same
/// signature).
fn elapsed_ms(start: &CudaEvent, end: &CudaEvent) -> Result<f32> {
    static FN: OnceLock<Option<ElapsedFn>> = OnceLock::new();
    let f = FN.get_or_init(|| {
        // SAFETY: the driver library is loaded (events exist); both names have this signature.
        unsafe {
            let lib = dsys::culib();
            lib.get::<ElapsedFn>(b"cuEventElapsedTime_v2")
                .or_else(|_| lib.get::<ElapsedFn>(b"cuEventElapsedTime"))
                .ok()
                .map(|s| *s)
        }
    });
    let Some(f) = f else {
        return Err(crate::error::Error::Cuda(
            "the driver exports no cuEventElapsedTime".into(),
        ));
    };
    start.context().bind_to_thread()?;
    start.synchronize()?;
    end.synchronize()?;
    let mut ms = 0f32;
    // SAFETY: two recorded, completed events of the current context.
    unsafe { f(&mut ms, start.cu_event(), end.cu_event()) }.result()?;
    Ok(ms)
}

/// The stage timings (name, ms) of the last GPU call that recorded a timeline.
pub fn last() -> Vec<(String, f64)> {
    LAST.lock().unwrap_or_else(|e| e.into_inner()).clone()
}
