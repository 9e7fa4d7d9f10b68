//! The text of `fastpmi --help` (printed for every subcommand's `-h` too).

pub const USAGE: &str = "\
usage: fastpmi [options] [-n N] PROG [ARGS...] [: [-n M] PROG2 [ARGS...]]...
       fastpmi demo [-n N] [options]
       fastpmi nameserver [--port P] [--bind ADDR]
       fastpmi ps [PID|JOBID] [--json]
       fastpmi release PID|JOBID
       fastpmi checkpoint PID|JOBID

Launch N ranks of PROG on this node with a PMI-1/PMI-2 server (MPICH,
Intel MPI and Slurm's libpmi2 clients run unmodified). Each `:` section is
one application of an MPMD job (appnum 0, 1, ...); all sections form one job.

Options (global, before the first program):
  -genv K V         set K=V in every rank's environment (repeatable)
  -l, --label       prefix every output line with [rank]
  --pmi-port        serve PMI on a TCP port on 127.0.0.1 (PMI_PORT/PMI_ID)
                    instead of an inherited socket (PMI_FD). Each job gets a
                    random secret (FASTPMI_AUTH_SECRET); a connection must
                    authenticate with it, or come from loopback, from this
                    user, and from the process started as the rank it claims
  --pmi-port-bind ADDR
                    port mode listening on ADDR (e.g. an address other nodes
                    reach); connections from elsewhere must authenticate
  --nest auto|off   started as a rank of a PMI job of several ranks
                    (srun --mpi=pmi2, mpiexec.hydra, another fastpmi), be
                    that job's server for this node: the ranks of every node
                    server form one job (default auto; off: a separate job
                    per node server, also FASTPMI_NEST=off)
  --mem-pool P      memory of the job segment that fastpmi clients use for
                    put/get/fence: anonmmap (memfd, default), sysv, or none
                    (no segment: everything over the socket)
  --kvs-mb MB       size the segment's key-value store to MB MiB (default:
                    from the rank count)
  --stats           print, at job end, how many puts, gets, fences and
                    node-attribute operations each transport served
  --tolerate-group-failures
                    a rank that dies while a member of a process group
                    fails its groups (the other members get an error naming
                    it) instead of its whole job
  --fault-tolerant  a rank that dies (signal, non-zero exit, lost
                    connection, abort of itself) ends alone: the others go
                    on, learn of it (PMI_dead_processes, PMIx events, the
                    segment's dead set) and their job fence fails naming
                    it. Exit status 0 unless a survivor fails or the job is
                    aborted. Also -disable-auto-cleanup, --with-ft ulfm;
                    holds for spawned jobs (docs/fault-tolerance.md)
  --fail-on-death   --fault-tolerant, and a death fails the exit status
                    (the first dead rank's)
  --stop-in-init    hold every rank inside PMI init until `fastpmi release`
                    (or a debugger continues from MPIR_Breakpoint)
  --fence-timeout SECS
                    fail the job, with a report of the missing ranks, when a
                    fence or node-attribute wait stays incomplete that long
                    (also FASTPMI_FENCE_TIMEOUT)
  -bind-to OBJ[:N]  bind each rank to N (default 1) objects of OBJ: none,
                    hwthread, core, l1cache, l2cache, l3cache, numa, socket.
                    More ranks than objects wrap around (rank r gets
                    object r mod count). Default: core, wrapping past the
                    core count; none opts out (docs/placement.md).
                    Also --bind-to
  -map-by OBJ       place consecutive ranks round-robin over OBJ objects
                    (default: the -bind-to object). Also --map-by
  -ppn N            ranks per node (one node: accepted, no effect)
  --print-bindings  print each rank's CPU list on stderr at start
                    (also --report-bindings)
  -v, --verbose     on failure, also print every rank's state, last PMI
                    operation and fence count
  --nameserver HOST:PORT
                    publish and look up names (MPI_Publish_name,
                    MPI_Lookup_name) in a `fastpmi nameserver` shared with
                    other launchers, instead of this launcher's own table
  --pmix-lib PATH   OpenPMIx server library to load (default Debian's
                    libpmix.so.2; also FASTPMI_PMIX_LIB)
  -h, --help        this help
  -V, --version     print the version

Options (per section, before its program):
  -n, -np N         number of ranks of this section (default 1)
  -env K V          set K=V for the ranks of this section (repeatable)
  -wdir DIR         working directory of this section's ranks
  --pset NAME[,NAME...]
                    put this section's ranks in the named process sets (job
                    attributes psetNames, pset:NAME, mypsets; repeatable)
  --pmi auto|pmi|pmix
                    what this section's ranks are served: PMI-1/PMI-2, or
                    PMIx through OpenPMIx's server library (Open MPI);
                    auto (default): PMIx for programs linking libpmix or
                    Open MPI's libmpi.so.40; name it for interpreters
                    (python3 -m mpi4py) and scripts

Environment:
  FASTPMI_LOG=debug log every PMI command and reply with its rank (stderr)
  FASTPMI_FENCE_TIMEOUT=SECS  as --fence-timeout
  FASTPMI_FENCE_YIELDS=N  (read by the ranks) CPU yields before a rank
                    sleeps in a shared-memory fence, 0..16 (default 2;
                    none in the job's first fence)

`fastpmi ps` lists this user's running launchers; `fastpmi ps PID|JOBID`
prints one row per rank (pid, PMI transport, state and for how long, last
PMI operation, fences) and what each job waits for; --json for tools.
SIGUSR1 to a launcher prints the same report on its stderr.
`fastpmi release PID|JOBID` lets ranks held by --stop-in-init go on.
`fastpmi checkpoint PID|JOBID` asks the ranks for an application
checkpoint on their out-of-band channels (docs/oob.md).

Ranks may spawn new jobs (MPI_Comm_spawn); the launcher exits when every
job has ended. A failing rank ends its job and every job connected to it.

`fastpmi nameserver` serves names to launchers started with --nameserver
(default port 6392, address 127.0.0.1) and prints the address it listens on.

Exit status: 0 when every rank exits 0; otherwise the first failing rank's
exit code (128+signal when a signal killed it), with one line on stderr
naming the rank. SIGINT/SIGTERM are forwarded to the ranks.";
