pub mod npm_fixture;
pub mod replay;
