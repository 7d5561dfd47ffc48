//! Real etcd processes for tests (feature `testing`): a single node or a cluster
//! on loopback, each member with its own temporary data directory and free ports,
//! killed when dropped.
//!
//! There is deliberately no "skip when etcd is missing": [`EtcdCluster::start`]
//! panics with the install command, so CI cannot pass by not testing.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fencepost::LeaseStore;

use crate::{EtcdOptions, EtcdStore};

/// How long a cluster may take to elect a leader and answer.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The message of a missing binary: how to get one.
pub const INSTALL_HINT: &str = "etcd not found: these tests need a real etcd server. \
Install it with `apt-get install -y etcd-server` (Debian/Ubuntu; the binary is /usr/bin/etcd), \
or point ETCD_BIN at an etcd binary";

/// Finds the etcd binary: `$ETCD_BIN`, else `etcd` on `PATH`, else `/usr/bin/etcd`
/// or `/usr/local/bin/etcd`.
///
/// # Panics
///
/// When there is none, with [`INSTALL_HINT`].
pub fn etcd_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("ETCD_BIN").filter(|b| !b.is_empty()) {
        let bin = PathBuf::from(bin);
        assert!(
            bin.is_file(),
            "ETCD_BIN={} is not a file. {INSTALL_HINT}",
            bin.display()
        );
        return bin;
    }
    let on_path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("etcd"))
                .collect()
        })
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain([
            PathBuf::from("/usr/bin/etcd"),
            PathBuf::from("/usr/local/bin/etcd"),
        ])
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{INSTALL_HINT}"))
}

/// A port that was free a moment ago (bound to port 0, then closed).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding a loopback port")
}

/// One member: its ports, data directory and (while running) process.
#[derive(Debug)]
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// An etcd cluster of one or more members on 127.0.0.1, stopped (SIGKILL) and its
/// data deleted on drop.
#[derive(Debug)]
pub struct EtcdCluster {
    binary: PathBuf,
    members: Vec<Member>,
    initial_cluster: String,
    dir: tempfile::TempDir,
}

impl EtcdCluster {
    /// Starts a single node and waits until it answers.
    ///
    /// # Panics
    ///
    /// When etcd is not installed ([`INSTALL_HINT`]) or does not come up.
    pub fn single() -> EtcdCluster {
        EtcdCluster::start(1)
    }

    /// Starts `size` members forming one cluster and waits until it answers. Ports
    /// taken by someone else between choosing and binding are retried with new ones.
    ///
    /// # Panics
    ///
    /// When etcd is not installed ([`INSTALL_HINT`]) or the cluster does not come up
    /// (the message carries the members' logs).
    pub fn start(size: usize) -> EtcdCluster {
        let binary = etcd_binary();
        let mut last = String::new();
        for _ in 0..3 {
            match EtcdCluster::try_start(&binary, size) {
                Ok(cluster) => return cluster,
                Err(why) => last = why,
            }
        }
        panic!("etcd did not start: {last}");
    }

    fn try_start(binary: &Path, size: usize) -> Result<EtcdCluster, String> {
        let dir = tempfile::Builder::new()
            .prefix("fencepost-etcd-")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?;
        let members: Vec<Member> = (0..size)
            .map(|i| Member {
                name: format!("m{i}"),
                client_port: free_port(),
                peer_port: free_port(),
                data_dir: dir.path().join(format!("m{i}.etcd")),
                log: dir.path().join(format!("m{i}.log")),
                child: None,
            })
            .collect();
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = EtcdCluster {
            binary: binary.to_path_buf(),
            members,
            initial_cluster,
            dir,
        };
        for i in 0..size {
            cluster.spawn(i, "new")?;
        }
        cluster.wait_ready()?;
        Ok(cluster)
    }

    fn spawn(&mut self, index: usize, state: &str) -> Result<(), String> {
        let member = &self.members[index];
        let client = format!("http://127.0.0.1:{}", member.client_port);
        let peer = format!("http://127.0.0.1:{}", member.peer_port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&member.log)
            .map_err(|e| format!("{}: {e}", member.log.display()))?;
        let child = Command::new(&self.binary)
            .arg("--name")
            .arg(&member.name)
            .arg("--data-dir")
            .arg(&member.data_dir)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", "fencepost-test"])
            // Loopback: elect fast, so a killed leader costs well under a second.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--logger", "zap", "--log-level", "warn"])
            .env_remove("ETCDCTL_API")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", self.binary.display()))?;
        self.members[index].child = Some(child);
        Ok(())
    }

    /// Waits until a linearizable read succeeds through every running member.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let options = EtcdOptions {
            connect_timeout: Duration::from_millis(500),
            request_timeout: Duration::from_secs(2),
        };
        for index in 0..self.members.len() {
            if self.members[index].child.is_none() {
                continue;
            }
            let url = format!(
                "etcd://127.0.0.1:{}/fencepost-ready",
                self.members[index].client_port
            );
            let store = EtcdStore::open_with(&url, options).map_err(|e| e.to_string())?;
            loop {
                let member = &mut self.members[index];
                if let Some(status) = member
                    .child
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten())
                {
                    member.child = None;
                    return Err(format!(
                        "member {} exited with {status}; its log:\n{}",
                        member.name,
                        std::fs::read_to_string(&member.log).unwrap_or_default()
                    ));
                }
                match store.keys() {
                    Ok(_) => break,
                    Err(e) if Instant::now() > deadline => {
                        let name = member.name.clone();
                        return Err(format!(
                            "member {name} not ready after {READY_TIMEOUT:?}: {e}; logs:\n{}",
                            self.logs()
                        ));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }
        Ok(())
    }

    /// Every member's log, for failure messages.
    pub fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                format!(
                    "--- {} ---\n{}",
                    m.name,
                    std::fs::read_to_string(&m.log).unwrap_or_default()
                )
            })
            .collect()
    }

    /// `host:port` of every member's client URL, comma-separated (for a store URL).
    pub fn endpoints(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `etcd://<every member>/<prefix>`.
    pub fn url(&self, prefix: &str) -> String {
        format!(
            "etcd://{}/{}",
            self.endpoints(),
            prefix.trim_start_matches('/')
        )
    }

    /// The client port of member `index`.
    pub fn client_port(&self, index: usize) -> u16 {
        self.members[index].client_port
    }

    /// The number of members.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// Kills member `index` with SIGKILL (no shutdown, no flush beyond what etcd
    /// already fsynced) and waits for it to die.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.members[index].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Restarts member `index` (killed before) from its data directory, and waits
    /// until the cluster answers through it.
    ///
    /// # Panics
    ///
    /// When it does not come back (with the logs).
    pub fn restart(&mut self, index: usize) {
        assert!(
            self.members[index].child.is_none(),
            "member {index} is running"
        );
        let restarted = self
            .spawn(index, "existing")
            .and_then(|()| self.wait_ready());
        if let Err(why) = restarted {
            panic!("restarting member {index}: {why}");
        }
    }

    /// Where the members keep their data and logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for index in 0..self.members.len() {
            self.kill(index);
        }
    }
}
