//! What of OCI the release's files name: the reference grammar ([`reference`]) and the media
//! types and canonical bytes of the image index ([`index`]).

pub mod index;
pub mod reference;
