export * from './corestorelegacy.js';
