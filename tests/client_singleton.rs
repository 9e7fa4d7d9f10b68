//! The Rust client with no launcher: rank 0 of 1 with a local store.

use fastpmi_client::{Pmi, TransportKind};

#[test]
fn without_pmi_environment_the_client_is_a_singleton() {
    for v in ["PMI_FD", "PMI_PORT", "PMI_ID", "PMI_RANK", "PMI_SIZE"] {
        assert!(
            std::env::var_os(v).is_none(),
            "{v} is set in the test environment"
        );
    }
    let pmi = Pmi::init().unwrap();
    assert_eq!(
        (pmi.rank(), pmi.size(), pmi.appnum(), pmi.spawned()),
        (0, 1, 0, false)
    );
    assert_eq!(pmi.transport(), TransportKind::Singleton);
    assert_eq!(pmi.fallback_reason(), None);
    pmi.put("bc", "card-0").unwrap();
    pmi.fence().unwrap();
    assert_eq!(
        pmi.get("bc", Some(0)).unwrap().as_deref(),
        Some(&b"card-0"[..])
    );
    assert_eq!(pmi.get("missing", None).unwrap(), None);
    assert!(pmi.get_from(Some("another-job"), "bc", None).is_err());
    pmi.put_node_attr("na", "x").unwrap();
    assert_eq!(
        pmi.get_node_attr("na", true).unwrap().as_deref(),
        Some(&b"x"[..])
    );
    assert_eq!(
        pmi.get_node_attr("nope", true).unwrap(),
        None,
        "a singleton must not hang"
    );
    assert_eq!(
        pmi.job_attr("PMI_process_mapping").unwrap().as_deref(),
        Some(&b"(vector,(0,1,1))"[..])
    );
    assert_eq!(
        pmi.node_attr_int_array("localRanks").unwrap(),
        Some(vec![0])
    );
    assert!(
        pmi.publish("svc", "port").is_err(),
        "no name service without a launcher"
    );
    pmi.finalize().unwrap();
    assert!(
        pmi.put("late", "x").is_err(),
        "use after finalize is an error"
    );
}
