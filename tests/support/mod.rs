pub mod genuine_release;
pub mod npm_fixture;
pub mod replay;
