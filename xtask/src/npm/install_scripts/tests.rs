use super::*;

fn sha(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn package_json(scripts: serde_json::Value) -> String {
    serde_json::json!({ "name": "p", "version": "1.0.0", "scripts": scripts }).to_string()
}

fn file(path: &str) -> Target {
    Target::File {
        path: path.into(),
        javascript: true,
    }
}

#[test]
fn commands_are_attributed_only_when_every_part_is_plain() {
    assert_eq!(targets("node install.cjs"), Some(vec![file("install.cjs")]));
    assert_eq!(
        targets("bun ./postinstall.mjs || node ./postinstall.mjs"),
        Some(vec![file("./postinstall.mjs"), file("./postinstall.mjs")])
    );
    assert_eq!(
        targets("echo 'building' && node \"scripts/build.js\" --quiet"),
        Some(vec![file("scripts/build.js")])
    );
    assert_eq!(targets("node-gyp rebuild"), Some(vec![Target::Gyp]));
    assert_eq!(
        targets("node -e \"require('./x')\""),
        Some(vec![Target::Inline("require('./x')".into())])
    );
    assert_eq!(
        targets("sh ./setup.sh"),
        Some(vec![Target::File {
            path: "./setup.sh".into(),
            javascript: false
        }])
    );
    for unattributable in [
        "node -r ./hook.js install.js",
        "NODE_OPTIONS=--require=./x.js node install.js",
        "node $DIR/install.js",
        "node \"$DIR/install.js\"",
        "node `pwd`/install.js",
        "node install.js > log",
        "node install.js | tee log",
        "node install.js &",
        "prebuild-install || node-gyp rebuild",
        "node install.js;",
        "(node install.js)",
        "node install.js # comment",
        "node 'unterminated",
        "node",
    ] {
        assert_eq!(targets(unattributable), None, "{unattributable}");
    }
}

#[test]
fn the_files_a_script_runs_are_hashed_with_the_modules_it_loads_but_not_its_data() {
    let install = "const pkg = require('./package.json');\nconst a = require( \"./lib/a\" );\n\
                   import('./lib/late.mjs');\nconst os = require('os');\n";
    let a = "import { b } from '../util.cjs';\nrequire(`./${name}`);\n";
    let util = "module.exports = 1;\n";
    let late = "export default 2;\n";
    let files = PackageFiles::from_files(&[
        (
            "package.json",
            &package_json(serde_json::json!({
                "postinstall": "node install.cjs", "prepare": "node evil.js", "test": "node t.js"
            })),
        ),
        ("install.cjs", install),
        ("lib/a.js", a),
        ("util.cjs", util),
        ("lib/late.mjs", late),
        ("evil.js", "x"),
        ("unrelated.js", "y"),
    ]);
    let scripts = scripts_of(&files).unwrap();
    assert_eq!(scripts.postinstall.as_deref(), Some("node install.cjs"));
    assert_eq!((&scripts.preinstall, &scripts.install), (&None, &None));
    assert_eq!(
        scripts.files,
        BTreeMap::from([
            ("install.cjs".to_string(), sha(install)),
            ("lib/a.js".to_string(), sha(a)),
            ("lib/late.mjs".to_string(), sha(late)),
            ("util.cjs".to_string(), sha(util)),
        ])
    );
}

#[test]
fn a_binding_gyp_implies_node_gyp_as_npm_does() {
    let gyp = "{ 'targets': [] }";
    let with = |scripts: serde_json::Value, extra: serde_json::Value| {
        let mut pj: serde_json::Value = serde_json::from_str(&package_json(scripts)).unwrap();
        if let Some(o) = extra.as_object() {
            for (k, v) in o {
                pj[k] = v.clone();
            }
        }
        let pj = pj.to_string();
        scripts_of(&PackageFiles::from_files(&[
            ("package.json", &pj),
            ("binding.gyp", gyp),
        ]))
        .unwrap()
    };
    let implied = with(serde_json::json!({}), serde_json::json!({}));
    assert_eq!(implied.install.as_deref(), Some("node-gyp rebuild"));
    assert_eq!(
        implied.files,
        BTreeMap::from([("binding.gyp".into(), sha(gyp))])
    );
    let off = with(
        serde_json::json!({}),
        serde_json::json!({ "gypfile": false }),
    );
    assert_eq!(off, InstallScripts::default());
    let own = with(
        serde_json::json!({ "preinstall": "echo hi" }),
        serde_json::json!({}),
    );
    assert_eq!((own.install, own.files.len()), (None, 0));
}

#[test]
fn tarballs_unpack_below_any_top_folder_keeping_regular_files_only() {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let mut add = |path: &str, body: &str| {
        let mut header = tar::Header::new_gnu();
        header.set_size(body.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, path, body.as_bytes()).unwrap();
    };
    add(
        "node/package.json",
        &package_json(serde_json::json!({ "install": "node ./x.js" })),
    );
    add("node/x.js", "1");
    let mut link = tar::Header::new_gnu();
    link.set_entry_type(tar::EntryType::Symlink);
    link.set_size(0);
    link.set_cksum();
    tar.append_link(&mut link, "node/y.js", "/etc/passwd")
        .unwrap();
    let tgz = tar.into_inner().unwrap().finish().unwrap();
    let files = PackageFiles::from_tgz(&tgz).unwrap();
    assert_eq!(
        files.files.keys().collect::<Vec<_>>(),
        ["package.json", "x.js"]
    );
    let scripts = scripts_of(&files).unwrap();
    assert_eq!(scripts.files, BTreeMap::from([("x.js".into(), sha("1"))]));
    assert!(PackageFiles::from_tgz(b"not gzip").is_err());
}

#[test]
fn a_difference_names_the_command_or_file_and_both_values_and_the_remedy_parses() {
    let acknowledged = InstallScripts {
        postinstall: Some("node install.cjs".into()),
        files: BTreeMap::from([("install.cjs".into(), sha("old"))]),
        ..Default::default()
    };
    assert_eq!(judge("p", "1.0.0", &acknowledged, &acknowledged), Ok(()));
    let mut changed = acknowledged.clone();
    changed.files.insert("install.cjs".into(), sha("new"));
    let why = judge("p", "2.0.0", &acknowledged, &changed).unwrap_err();
    assert!(
        why.contains("install.cjs")
            && why.contains(&sha("new"))
            && why.contains(&sha("old"))
            && why.contains("2.0.0")
            && why.contains(template_formats::paths::MANIFEST),
        "{why}"
    );
    let mut added = acknowledged.clone();
    added.preinstall = Some("node steal.js".into());
    added.files.insert("steal.js".into(), sha("x"));
    let lines = differences(&acknowledged, &added, "2.0.0");
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].contains("preinstall is `node steal.js` in 2.0.0, none acknowledged"));
    assert!(lines[1].contains("steal.js") && lines[1].contains("not acknowledged"));
    let gone = InstallScripts {
        postinstall: Some("node install.cjs".into()),
        ..Default::default()
    };
    assert!(differences(&acknowledged, &gone, "2.0.0")[0].contains("is not run in 2.0.0"));

    // The remedy's lines are what the manifest holds under `install_scripts_allowed:`.
    let remedy = remedy("@scope/p", "2.0.0", &added);
    let yaml: String = remedy
        .lines()
        .skip(1)
        .filter(|l| !l.trim_start().starts_with('('))
        .map(|l| format!("{}\n", l.strip_prefix("  ").unwrap()))
        .collect();
    let parsed: BTreeMap<String, InstallScripts> = yaml_serde::from_str(&yaml).unwrap();
    assert_eq!(parsed, BTreeMap::from([("@scope/p".to_string(), added)]));
    let hand = InstallScripts {
        install: Some("prebuild-install || node-gyp rebuild".into()),
        ..Default::default()
    };
    assert!(super::remedy("p", "1.0.0", &hand).contains("review what it runs by hand"));
}

#[tokio::test]
async fn a_cached_tarball_is_read_by_its_digest_and_a_corrupt_one_is_not_trusted() {
    let cache = tempfile::tempdir().unwrap();
    let tgz = b"tarball bytes".to_vec();
    let integrity = format!(
        "sha512-{}",
        base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            Sha512::digest(&tgz)
        )
    );
    let path = cached_path(cache.path(), &integrity).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &tgz).unwrap();
    // Nothing answers at this URL: a hit never goes to the network.
    let nowhere = "http://127.0.0.1:9/p/-/p-1.0.0.tgz";
    assert_eq!(
        tarball(cache.path(), nowhere, &integrity).await.unwrap(),
        Ok(tgz)
    );
    // A cached file that is not that tarball is downloaded again (and here nothing answers).
    std::fs::write(&path, b"tampered").unwrap();
    let err = format!(
        "{:#}",
        tarball(cache.path(), nowhere, &integrity)
            .await
            .unwrap_err()
    );
    assert!(err.contains(nowhere), "{err}");
    assert!(tarball(cache.path(), nowhere, "sha1-AAAA")
        .await
        .unwrap()
        .unwrap_err()
        .contains("not a sha512"));
}
