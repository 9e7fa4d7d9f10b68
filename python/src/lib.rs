//! `fastpmi._fastpmi`: the Rust client ([`fastpmi_client::Pmi`]) as the
//! Python class `fastpmi.Pmi` (docs/python.md). Keys and values are `str`
//! (UTF-8) or `bytes` in, `bytes` out; the client's errors become the
//! exception classes of `fastpmi.errors`; the GIL is released wherever the
//! client may wait (init, fence, get, attributes, a wait for a death).

use std::sync::OnceLock;
use std::time::Duration;

use fastpmi_client::{PmiError, TransportKind};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use pyo3::IntoPyObjectExt;

/// A PMI client: `Pmi()` initialises (under a launcher, its rank of the
/// job; without one, a singleton), `Pmi(init=False)` waits for `init()`.
#[pyclass(module = "fastpmi", name = "Pmi", frozen)]
struct Pmi {
    inner: OnceLock<fastpmi_client::Pmi>,
}

/// The exception of `fastpmi.errors` named `class`, with `message` and the
/// attributes `attrs`.
fn raise(py: Python<'_>, class: &str, message: String, attrs: &[(&str, Py<PyAny>)]) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let cls = py.import("fastpmi.errors")?.getattr(class)?;
        let e = cls.call1((message.clone(),))?;
        for (k, v) in attrs {
            e.setattr(*k, v)?;
        }
        Ok(PyErr::from_value(e))
    })();
    // An import that fails (a broken install) is itself the error to see.
    made.unwrap_or_else(|e| e)
}

/// The Python exception of a client error.
fn to_py(py: Python<'_>, e: PmiError) -> PyErr {
    let message = e.to_string();
    let made = (|| -> PyResult<PyErr> {
        let mut attrs = vec![("code", e.code().into_py_any(py)?)];
        let class = match e {
            PmiError::InvalidArg(_) => "InvalidArgument",
            PmiError::Finalized => "Finalized",
            PmiError::Unsupported(_) => "Unsupported",
            PmiError::Aborted { code, rank } => {
                attrs.push(("exit_code", code.into_py_any(py)?));
                attrs.push(("rank", rank.into_py_any(py)?));
                "Aborted"
            }
            PmiError::RanksDied { ranks, .. } => {
                attrs.push(("ranks", ranks.into_py_any(py)?));
                "RanksDied"
            }
            PmiError::Server { rc, .. } => {
                attrs.push(("rc", rc.into_py_any(py)?));
                "ServerError"
            }
            PmiError::Io(_) => "ConnectionLost",
            PmiError::Env(_) | PmiError::Protocol(_) | PmiError::Wire(_) => "PmiError",
        };
        Ok(raise(py, class, message, &attrs))
    })();
    made.unwrap_or_else(|e| e)
}

/// `obj` as bytes: `bytes` as they are, `str` as UTF-8.
fn bytes_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    let ty = obj.get_type().name()?;
    Err(PyTypeError::new_err(format!(
        "{what} must be str or bytes, not {ty}"
    )))
}

fn bytes_or_none(py: Python<'_>, v: Option<Vec<u8>>) -> Option<Py<PyBytes>> {
    v.map(|v| PyBytes::new(py, &v).unbind())
}

impl Pmi {
    /// `f` on the client with `key` and `value` as bytes.
    fn with_pair(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        f: impl FnOnce(&fastpmi_client::Pmi, Vec<u8>, Vec<u8>) -> Result<(), PmiError>,
    ) -> PyResult<()> {
        let (key, value) = (bytes_of(key, "key")?, bytes_of(value, "value")?);
        f(self.client(py)?, key, value).map_err(|e| to_py(py, e))
    }

    /// The client, or `NotInitialized`.
    fn client(&self, py: Python<'_>) -> PyResult<&fastpmi_client::Pmi> {
        self.inner.get().ok_or_else(|| {
            raise(
                py,
                "NotInitialized",
                "PMI is not initialised: call init() first (or create Pmi() with init=True)".into(),
                &[],
            )
        })
    }
}

#[pymethods]
impl Pmi {
    #[new]
    #[pyo3(signature = (init = true))]
    fn new(py: Python<'_>, init: bool) -> PyResult<Self> {
        let p = Pmi {
            inner: OnceLock::new(),
        };
        if init {
            p.init(py)?;
        }
        Ok(p)
    }

    /// Initialise: connect to the launcher, or become a singleton.
    fn init(&self, py: Python<'_>) -> PyResult<()> {
        if self.inner.get().is_some() {
            return Err(raise(
                py,
                "PmiError",
                "PMI is initialised already".into(),
                &[],
            ));
        }
        let client = py
            .detach(fastpmi_client::Pmi::init)
            .map_err(|e| to_py(py, e))?;
        // Two threads racing here: the second's client is dropped unused.
        let _ = self.inner.set(client);
        Ok(())
    }

    /// Whether `init` has succeeded.
    #[getter]
    fn initialized(&self) -> bool {
        self.inner.get().is_some()
    }

    #[getter]
    fn rank(&self, py: Python<'_>) -> PyResult<u32> {
        Ok(self.client(py)?.rank())
    }

    #[getter]
    fn size(&self, py: Python<'_>) -> PyResult<u32> {
        Ok(self.client(py)?.size())
    }

    #[getter]
    fn appnum(&self, py: Python<'_>) -> PyResult<i32> {
        Ok(self.client(py)?.appnum())
    }

    #[getter]
    fn job_id(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.client(py)?.job_id().to_string())
    }

    /// Whether this job was spawned by another.
    #[getter]
    fn spawned(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.client(py)?.spawned())
    }

    /// `"shm"`, `"socket"` or `"singleton"`.
    #[getter]
    fn transport(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(match self.client(py)?.transport() {
            TransportKind::Shm => "shm",
            TransportKind::Socket => "socket",
            TransportKind::Singleton => "singleton",
        })
    }

    /// Put `key` = `value` in the job's KVS (seen by all after the next
    /// fence).
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.with_pair(py, key, value, |c, k, v| c.put(k, v))
    }

    /// Wait until every rank of the job has fenced (GIL released).
    fn fence(&self, py: Python<'_>) -> PyResult<()> {
        let c = self.client(py)?;
        py.detach(|| c.fence()).map_err(|e| to_py(py, e))
    }

    /// The value of `key` (put by `rank`, if known), or None.
    #[pyo3(signature = (key, rank = None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        rank: Option<u32>,
    ) -> PyResult<Option<Py<PyBytes>>> {
        let key = bytes_of(key, "key")?;
        let c = self.client(py)?;
        let v = py.detach(|| c.get(key, rank)).map_err(|e| to_py(py, e))?;
        Ok(bytes_or_none(py, v))
    }

    /// Every pair of the job's KVS as a dict of bytes.
    fn get_all<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.client(py)?;
        let pairs = py.detach(|| c.kvs_getall(None)).map_err(|e| to_py(py, e))?;
        let d = PyDict::new(py);
        for (k, v) in pairs {
            d.set_item(PyBytes::new(py, &k), PyBytes::new(py, &v))?;
        }
        Ok(d)
    }

    /// A job attribute (`PMI_process_mapping`, `universeSize`,
    /// `PMI_dead_processes`...), or None.
    fn job_attr(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyBytes>>> {
        let key = bytes_of(key, "key")?;
        let c = self.client(py)?;
        let v = py.detach(|| c.job_attr(key)).map_err(|e| to_py(py, e))?;
        Ok(bytes_or_none(py, v))
    }

    /// A node attribute, or None; with `wait`, until a rank of this node
    /// puts it.
    #[pyo3(signature = (key, wait = false))]
    fn node_attr(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        wait: bool,
    ) -> PyResult<Option<Py<PyBytes>>> {
        let key = bytes_of(key, "key")?;
        let c = self.client(py)?;
        let v = py
            .detach(|| c.get_node_attr(key, wait))
            .map_err(|e| to_py(py, e))?;
        Ok(bytes_or_none(py, v))
    }

    /// Put a node attribute (seen at once by this node's ranks).
    fn put_node_attr(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.with_pair(py, key, value, |c, k, v| c.put_node_attr(k, v))
    }

    /// The job's dead ranks, ascending (fault-tolerant jobs).
    fn dead_ranks(&self, py: Python<'_>) -> PyResult<Vec<u32>> {
        let c = self.client(py)?;
        py.detach(|| c.dead_ranks()).map_err(|e| to_py(py, e))
    }

    /// Wait until more than `seen` ranks died: their count, or None when
    /// `timeout` (seconds) passed first.
    #[pyo3(signature = (seen, timeout = None))]
    fn wait_for_death(
        &self,
        py: Python<'_>,
        seen: u32,
        timeout: Option<f64>,
    ) -> PyResult<Option<u32>> {
        let timeout = match timeout {
            Some(t) => Some(Duration::try_from_secs_f64(t).map_err(|_| {
                raise(
                    py,
                    "InvalidArgument",
                    format!("timeout must be a finite number of seconds >= 0, not {t}"),
                    &[],
                )
            })?),
            None => None,
        };
        let c = self.client(py)?;
        py.detach(|| c.wait_for_death(seen, timeout))
            .map_err(|e| to_py(py, e))
    }

    /// End this process's PMI session (a rank that ends without it is
    /// reported by the launcher).
    fn finalize(&self, py: Python<'_>) -> PyResult<()> {
        let c = self.client(py)?;
        py.detach(|| c.finalize()).map_err(|e| to_py(py, e))
    }

    /// Abort the job (`world`; else this process only, in fault-tolerant
    /// jobs) with exit `code`: does not return.
    #[pyo3(signature = (code = 1, message = "", world = true))]
    fn abort(&self, py: Python<'_>, code: i32, message: &str, world: bool) -> PyResult<()> {
        let c = self.client(py)?;
        c.abort_with(code, message, world)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        if let Some(c) = self.inner.get() {
            match py.detach(|| c.finalize()) {
                Ok(()) | Err(PmiError::Finalized) => {}
                Err(e) => return Err(to_py(py, e)),
            }
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match self.inner.get() {
            Some(c) => format!(
                "fastpmi.Pmi(rank={}, size={}, job_id={:?})",
                c.rank(),
                c.size(),
                c.job_id()
            ),
            None => "fastpmi.Pmi(not initialised)".into(),
        }
    }
}

#[pymodule]
fn _fastpmi(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // As the C libraries: warnings and errors, or what FASTPMI_LOG says.
    fastpmi_client::logging::init(fastpmi_client::logging::Unset::Warnings);
    m.add_class::<Pmi>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
