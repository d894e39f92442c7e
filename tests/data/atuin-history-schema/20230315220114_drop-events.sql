-- Add migration script here
drop table events;
